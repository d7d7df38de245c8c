#!/usr/bin/env python3
"""int8 vs float32 edgepack bundles of the same model, and int8 edgepack vs onnxruntime-web on the QDQ model.

    python3 bench/int8_bench.py [--models cifar10net,mobilenetv2,resnet18,minilm_like] [--variant simd] [--seconds 3]
                                [--rounds 8] [--slice 0.5] [--no-ort-web] [--placements] [--json OUT]

1. wasmtime (packager.runtime, the .wasm a browser gets, one thread): the fp32 bundle of .cache/models/NAME.onnx
   and the int8 bundle of its fusion-aware QDQ model (bench/qdq_models.py) run interleaved A B A B in one process
   after a warm-up by time; prints medians and fp32/int8 (the speed-up).
   --placements adds the naive-placement QDQ bundle (same weights and scales) to the rotation: fusion-aware vs naive.
2. Node (bench/node_bench.mjs): edgepack's web runtime on the int8 bundle interleaved with onnxruntime-web
   (wasm, 1 thread, SIMD) on the same QDQ model: edgepack/ort-web.
The machine is shared: read ratios, not absolute times."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from bench.qdq_models import DYNAMIC, MODELS, make  # noqa: E402
from bench.timing import interleaved_ms  # noqa: E402

BUNDLES = REPO / ".cache" / "bundles-int8"


def bundle(model: Path, name: str) -> Path:
    from packager import package
    out = BUNDLES / name
    package(model, target="web", out=out, verify=False, dynamic=False,
            emit_onnx=True)   # static plans, batch 1; model.onnx: its size is reported with the plan's
    return out


def feeds_for(b) -> dict[str, np.ndarray]:
    from packager.reference import random_inputs   # the packager's own verification inputs
    return random_inputs(b.inputs, seed=1)


def interleaved(runners: dict, seconds: float, rounds: int, slice_s: float) -> dict[str, dict]:
    """Warm each runner up by time, then rounds of slice_s seconds per runner, in turn; median, p10, count."""
    times = interleaved_ms(runners, seconds, rounds, slice_s)
    return {k: {"median_ms": float(np.median(v)), "p10_ms": float(np.percentile(v, 10)), "n": len(v)}
            for k, v in times.items()}


def placement_of(name: str) -> str:
    """int8 static with fusion-aware placement, or int8-dynamic for the MatMul-heavy models (minilm_like)."""
    return "dynamic" if name in DYNAMIC else "fusion"


def wasm_runs(name: str, a: argparse.Namespace) -> dict:
    from packager import load_bundle
    paths = {"fp32": bundle(MODELS / f"{name}.onnx", f"{name}_fp32"),
             "int8": bundle(make(name, placement_of(name)), f"{name}_int8")}
    if a.placements and name not in DYNAMIC:
        paths["int8-naive"] = bundle(make(name, "naive"), f"{name}_int8_naive")
    loaded = {k: load_bundle(p, a.variant) for k, p in paths.items()}
    feeds = feeds_for(loaded["fp32"])
    runners = {k: (lambda b=b: b.run(feeds)) for k, b in loaded.items()}
    res = interleaved(runners, a.seconds, a.rounds, a.slice)
    sizes = {k: sum(f.stat().st_size for f in (p / n for n in ("model.plan", "model.onnx"))) for k, p in paths.items()}
    out = {"model": name, "variant": a.variant, "runtimes": res, "bundle_bytes (plan+onnx)": sizes,
           "fp32/int8": res["fp32"]["median_ms"] / res["int8"]["median_ms"],
           "fp32/int8 (p10)": res["fp32"]["p10_ms"] / res["int8"]["p10_ms"],
           "int8 size / fp32 size": sizes["int8"] / sizes["fp32"]}
    if "int8-naive" in res:
        out["naive/fusion-aware"] = res["int8-naive"]["median_ms"] / res["int8"]["median_ms"]
        out["naive/fusion-aware (p10)"] = res["int8-naive"]["p10_ms"] / res["int8"]["p10_ms"]
    return out


def node_runs(name: str, a: argparse.Namespace) -> dict:
    """edgepack (web runtime) vs onnxruntime-web on the same QDQ model, interleaved in one Node process."""
    model, b = make(name, placement_of(name)), BUNDLES / f"{name}_int8"
    report = BUNDLES / f"{name}_int8.node.json"
    cmd = ["node", str(BENCH / "node_bench.mjs"), str(model), str(b), "--seconds", str(a.seconds), "--rounds",
           str(a.rounds), "--slice", str(a.slice), "--variants", "simd", "--no-native", "--json", str(report),
           # ORT's int8 kernels round differently (see docs/int8.md): compare outputs loosely here
           "--atol", "0.5", "--rtol", "0.5"]
    r = subprocess.run(cmd, cwd=BENCH, capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": (r.stderr or r.stdout).strip().splitlines()[-1:]}
    rep = json.loads(report.read_text())
    return {"runtimes": {k: v["median_ms"] for k, v in rep["runtimes"].items()}, "ratios": rep.get("ratios", {})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="cifar10net,mobilenetv2,resnet18")
    ap.add_argument("--variant", default="simd", choices=["simd", "scalar", "relaxed"])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--slice", type=float, default=0.5)
    ap.add_argument("--placements", action="store_true", help="also time the naive-placement QDQ bundle")
    ap.add_argument("--no-ort-web", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    results = []
    for name in a.models.split(","):
        rep = wasm_runs(name, a)
        rt = rep["runtimes"]
        line = (f"{name:12s} wasmtime {a.variant}: fp32 {rt['fp32']['median_ms']:8.2f} ms  int8 {rt['int8']['median_ms']:8.2f} ms"
                f"  fp32/int8 {rep['fp32/int8']:.2f}x (p10 {rep['fp32/int8 (p10)']:.2f}x)"
                f"  size int8/fp32 {rep['int8 size / fp32 size']:.2f}")
        if "naive/fusion-aware" in rep:
            line += (f"  naive {rt['int8-naive']['median_ms']:8.2f} ms  naive/fusion-aware {rep['naive/fusion-aware']:.2f}x"
                     f" (p10 {rep['naive/fusion-aware (p10)']:.2f}x)")
        print(line, flush=True)
        if not a.no_ort_web:
            rep["node"] = node_runs(name, a)
            print(f"{'':12s} node: {json.dumps(rep['node'])}", flush=True)
        results.append(rep)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
