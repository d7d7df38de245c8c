"""The machine's int8 GEMM ceiling in WebAssembly (a benchmark, not a test): GMAC/s (int8 multiply-adds per ns) of
each integer dot form the int8 kernels can use, 6 independent accumulators fed from L1 (bench/int8_dot_peak.c),
built with relaxed SIMD, run in Node 20 (`--experimental-wasm-relaxed-simd`, CPU time) and with --chromium in
headless Chromium too (wall time: no CPU clock there). An int8 GEMM cannot run faster than its multiply-adds at the
rate of the form it uses; qgemm.c's `dot_i16x8` kernel is bound by the `i16` row, the relaxed build's i7 kernel
by `i7pair`.

    python3 -m bench.int8_dot_peak [--iters 20000000] [--chromium]
"""
from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.fma_peak import compile_wasm  # noqa: E402
FORMS = {"i16": 8, "i7add": 16, "i7pair": 16, "i7ext": 16}   # multiply-adds per dot instruction
# best of 5 runs of each form (Node: by CPU time, steadier under load); 6 dots per iteration
RUN = """const cpu = () => { if (typeof process === 'undefined') return performance.now();
  const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const run = async (b64, forms, n) => {
  const { instance } = await WebAssembly.instantiate(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
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
    return compile_wasm(REPO / "bench" / "int8_dot_peak.c", ["-msimd128", "-mrelaxed-simd"], out / "peak.wasm")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=20_000_000)
    ap.add_argument("--chromium", action="store_true", help="also in headless Chromium (tests/browser_env.py)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        b64 = base64.b64encode(build(Path(tmp))).decode()
        script = Path(tmp) / "peak.mjs"
        script.write_text(RUN + f"console.log(JSON.stringify(await run({json.dumps(b64)}, {json.dumps(FORMS)}, "
                          f"{a.iters})));\n")
        res = {"node": json.loads(subprocess.run(["node", "--experimental-wasm-relaxed-simd", str(script)], check=True,
                                                 capture_output=True, text=True).stdout)}
        if a.chromium:
            from tests.browser_env import chromium
            with chromium() as b:
                res["chromium"] = b.new_page().evaluate(f"async ({{ b64, forms, n }}) => {{ {RUN} return run(b64, forms, n); }}",
                                                        {"b64": b64, "forms": FORMS, "n": a.iters})
    print("int8 multiply-add peak, one thread, GMAC/s (best of 5; Node by CPU time, Chromium by wall time)")
    print(f"{'form':<8}" + "".join(f"{e:>10}" for e in res))
    for f in FORMS:
        print(f"{f:<8}" + "".join(f"{r[f]:>10.1f}" for r in res.values()))


if __name__ == "__main__":
    main()
