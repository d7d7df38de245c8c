"""The machine's int8 GEMM ceiling in WebAssembly (a benchmark, not a test): GMAC/s (int8 multiply-adds per ns) of
each integer dot form the int8 kernels can use, 6 independent accumulators fed from L1 (bench/int8_dot_peak.c),
built with relaxed SIMD, run in Node 20 (`--experimental-wasm-relaxed-simd`). An int8 GEMM cannot run faster than
its multiply-adds at the rate of the form it uses; qgemm.c's `dot_i16x8` kernel is bound by the `i16` row.

    python3 -m bench.int8_dot_peak [--iters 20000000]
"""
from __future__ import annotations

import argparse
import base64
import json
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLANG, WASM_LD = "clang-19", "/usr/lib/llvm-19/bin/wasm-ld"
FORMS = {"i16": 8, "i7add": 16, "i7pair": 16, "i7ext": 16}   # multiply-adds per dot instruction
# best of 5 runs of each form by CPU time; 6 dots per iteration
RUN = """const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };   // CPU ms: steadier under load
const run = async (b64, forms, n) => {
  const { instance } = await WebAssembly.instantiate(Buffer.from(b64, 'base64'));
  instance.exports.init();
  const r = {};
  for (const [f, macs] of Object.entries(forms)) {
    instance.exports[f](n);   // tier-up
    let best = 0;
    for (let k = 0; k < 5; k++) {
      const t0 = cpu(); instance.exports[f](n); const ms = cpu() - t0;
      best = Math.max(best, n * 6 * macs / ms / 1e6);
    }
    r[f] = best;
  }
  return r;
};
"""


def build(out: Path) -> bytes:
    obj, wasm = out / "peak.o", out / "peak.wasm"
    subprocess.run([CLANG, "--target=wasm32", "-nostdlib", "-O2", "-msimd128", "-mrelaxed-simd", "-c",
                    str(REPO / "bench" / "int8_dot_peak.c"), "-o", str(obj)], check=True)
    subprocess.run([WASM_LD, "--no-entry", str(obj), "-o", str(wasm)], check=True)
    return wasm.read_bytes()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=20_000_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        b64 = base64.b64encode(build(Path(tmp))).decode()
        script = Path(tmp) / "peak.mjs"
        script.write_text(RUN + f"console.log(JSON.stringify(await run({json.dumps(b64)}, {json.dumps(FORMS)}, "
                          f"{a.iters})));\n")
        r = json.loads(subprocess.run(["node", "--experimental-wasm-relaxed-simd", str(script)], check=True,
                                      capture_output=True, text=True).stdout)
    print("int8 multiply-add peak, Node, one thread, GMAC/s of CPU time (best of 5)")
    for f, v in r.items():
        print(f"{f:<8}{v:>8.1f}")


if __name__ == "__main__":
    main()
