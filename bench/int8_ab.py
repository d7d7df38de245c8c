#!/usr/bin/env python3
"""Two .wasm builds on one int8 bundle in wasmtime (packager.runtime), with the model's fp32 bundle as the
reference, by CPU time per run (time.process_time: steadier than wall clock on a loaded machine), interleaved
in one process, the order reversed every other round; prints medians, fp32/int8 for both builds and the
median of the per-round new/base ratios.

    python3 bench/int8_ab.py FP32_BUNDLE INT8_BUNDLE BASE.wasm NEW.wasm [--variant simd|relaxed] [--rounds 12]

BASE.wasm / NEW.wasm replace the int8 bundle's edgepack.wasm (simd) or edgepack-relaxed.wasm (relaxed) in two
temporary copies (loaded without the manifest's hash check)."""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.int8_bench import feeds_for  # noqa: E402
from packager import load_bundle  # noqa: E402
from packager.bundle import WASM_VARIANTS, Bundle  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fp32"); ap.add_argument("int8"); ap.add_argument("base"); ap.add_argument("new")
    ap.add_argument("--variant", default="simd", choices=["simd", "relaxed"])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--slice", type=float, default=0.3, help="CPU seconds per build per round")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        b = {"fp32": load_bundle(a.fp32, a.variant)}
        for k in ("base", "new"):
            d = Path(tmp) / k
            shutil.copytree(a.int8, d)
            shutil.copy(getattr(a, k), d / WASM_VARIANTS[a.variant])
            b[k] = Bundle(d, a.variant, verify=False)
        feeds = feeds_for(b["fp32"])
        for v in b.values():
            for _ in range(3):
                v.run(feeds)
        per: dict[str, list[float]] = {k: [] for k in b}
        for r in range(a.rounds):
            for k in (list(b) if r % 2 == 0 else list(b)[::-1]):
                t0, n = time.process_time(), 0
                while time.process_time() - t0 < a.slice:
                    b[k].run(feeds)
                    n += 1
                per[k].append((time.process_time() - t0) / n * 1e3)
    med = {k: float(np.median(v)) for k, v in per.items()}
    ratio = float(np.median([x / y for x, y in zip(per["new"], per["base"])]))
    print(f"{a.variant} CPU ms: fp32 {med['fp32']:.2f}  int8 base {med['base']:.2f}  new {med['new']:.2f} | "
          f"fp32/int8 base {med['fp32'] / med['base']:.2f}x  new {med['fp32'] / med['new']:.2f}x | paired new/base {ratio:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
