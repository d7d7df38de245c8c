"""The machine's float32 ceiling in WebAssembly (a benchmark, not a test): GFLOP/s of 12 independent f32x4
multiply-add chains (bench/fma_peak.c), built as SIMD128 (mul + add) and relaxed SIMD (FMA), run in Node and in
headless Chromium. A GEMM-bound model cannot run faster than its FLOPs at this rate on one thread. bench/zoo.py
measures the same builds (and fma_peak.c's memory stream) inside its own Node process (bench/ceilings.mjs).

    python3 -m bench.fma_peak [--iters 20000000]
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

from tests.browser_env import chromium, chromium_missing  # noqa: E402

CLANG, WASM_LD = "clang-19", "/usr/lib/llvm-19/bin/wasm-ld"
FLAGS = {"simd": ["-msimd128"], "relaxed": ["-msimd128", "-mrelaxed-simd"]}
# best of 5 runs of `peak(n)`; 12 chains x 4 lanes x 2 flops per iteration
RUN = """async ({ b64, n }) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const { instance } = await WebAssembly.instantiate(bytes);
  let best = 0;
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now(); instance.exports.peak(n, 0.5); const ms = performance.now() - t0;
    best = Math.max(best, n * 96 / ms / 1e6);
  }
  return best;
}"""


def compile_wasm(src: Path, flags: list[str], wasm: Path) -> bytes:
    """A freestanding C file of bench/ as a wasm module (no libc, no entry) at `wasm`; returns its bytes."""
    obj = wasm.with_suffix(".o")
    subprocess.run([CLANG, "--target=wasm32", "-nostdlib", "-O2", *flags, "-c", str(src), "-o", str(obj)], check=True)
    subprocess.run([WASM_LD, "--no-entry", str(obj), "-o", str(wasm)], check=True)
    return wasm.read_bytes()


def build(variant: str, out: Path) -> bytes:
    """out/VARIANT.wasm (the name bench/ceilings.mjs loads); returns its bytes."""
    return compile_wasm(REPO / "bench" / "fma_peak.c", FLAGS[variant], out / f"{variant}.wasm")


def build_all(out: Path) -> Path:
    """Both builds in `out` (node_bench.mjs --ceilings out)."""
    out.mkdir(parents=True, exist_ok=True)
    for v in FLAGS:
        build(v, out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=20_000_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wasms = {v: base64.b64encode(build(v, Path(tmp))).decode() for v in FLAGS}
        script = Path(tmp) / "peak.mjs"
        script.write_text(f"const run = {RUN};\nconst w = {json.dumps(wasms)};\n"
                          f"const r = {{}}; for (const k in w) r[k] = await run({{ b64: w[k], n: {a.iters} }});\n"
                          "console.log(JSON.stringify(r));\n")
        node = json.loads(subprocess.run(["node", "--experimental-wasm-relaxed-simd", str(script)], check=True,
                                         capture_output=True, text=True).stdout)
        browser = {}
        if not chromium_missing():
            with chromium() as b:
                page = b.new_page()
                browser = {v: page.evaluate(RUN, {"b64": wasms[v], "n": a.iters}) for v in FLAGS}
    print("float32 multiply-add peak, one thread, GFLOP/s (best of 5)")
    print(f"{'engine':<10}{'simd (mul+add)':>16}{'relaxed (fma)':>15}")
    for name, r in (("node", node), ("chromium", browser)):
        if r:
            print(f"{name:<10}{r['simd']:>16.1f}{r['relaxed']:>15.1f}")


if __name__ == "__main__":
    main()
