"""Version-2 plan (run-time shapes, the default for symbolic dims) against the static plan at the same shape, under
wasmtime (the SIMD build, what `package run` uses), paired in one process.

    python3 -m bench.plan_ab [--rounds 30] [--ms 100] [MODEL[=NAME=1x3x224x224] ...]

Each model is packaged twice: by default (a version-2 plan, its symbolic dims resolved at run time) and with its
symbolic dims fixed (the static plan: --input-shape given, or --static for batch 1). Both run the same feeds at the
static plan's shape. Per round, each session runs for `ms` of process CPU time (time.process_time: wasmtime is
single-threaded here, so other jobs on a shared machine count less than in wall time); the order is reversed every
other round, and a second instance of the static bundle gives the noise floor. Printed: median ms per run, and the
median of the per-round ratios to the static plan."""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# model -> the fixed shapes of its static plan (None: --static, every symbolic dim 1)
DEFAULT_MODELS = {"cifar10net": None, "cifar10net_unfused": None, "mobilenetv2": None, "resnet18": None,
                  "minilm_like_dyn": {"input_ids": (1, 128)}}


def _spec(s: str) -> tuple[str, dict | None]:
    name, _, shape = s.partition("=")
    if not shape:
        return name, DEFAULT_MODELS.get(name)
    inp, _, dims = shape.rpartition("=")
    return name, {inp: tuple(int(d) for d in dims.split("x"))}


def _cpu_ms_per_run(run, ms: float) -> float:
    run()   # the arena may reuse an input's bytes: every call writes the inputs again (Bundle.run does)
    t0 = time.process_time()
    n = 0
    while True:
        run()
        n += 1
        dt = (time.process_time() - t0) * 1e3
        if dt >= ms:
            return dt / n


def ab(name: str, shapes: dict | None, rounds: int, ms: float, work: Path) -> dict:
    from packager import load_bundle, package
    from packager.reference import random_inputs
    src = REPO / ".cache" / "models" / f"{name}.onnx"
    v2 = load_bundle(package(src, target="web", out=work / f"{name}_v2", verify=False))
    static_path = package(src, target="web", out=work / f"{name}_static", verify=False,
                          **({"input_shapes": shapes} if shapes else {"dynamic": False}))
    static, again = load_bundle(static_path), load_bundle(static_path)
    if v2.manifest["plan"]["version"] != 2:
        raise SystemExit(f"{name}: the default did not give a version-2 plan: {v2.manifest.get('notices')}")
    feeds = random_inputs(static.inputs, seed=0)
    want = static.run(feeds)
    for k, v in v2.run(feeds).items():   # the same program: the same numbers (to float rounding of block sizes)
        np.testing.assert_allclose(v, want[k], rtol=1e-4, atol=1e-4 * float(np.abs(want[k]).max(initial=1)))
    runs = {"static": lambda: static.run(feeds), "v2": lambda: v2.run(feeds), "static again": lambda: again.run(feeds)}
    for run in runs.values():   # warm-up by time
        end = time.perf_counter() + 2.0
        while time.perf_counter() < end:
            run()
    per: dict[str, list[float]] = {k: [] for k in runs}
    for r in range(rounds):
        for k in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            per[k].append(_cpu_ms_per_run(runs[k], ms))
    ratio = lambda k: statistics.median(a / b for a, b in zip(per[k], per["static"]))  # noqa: E731
    return {"model": name, "shape": {s["name"]: s["shape"] for s in static.inputs},
            "static_ms": statistics.median(per["static"]), "v2_ms": statistics.median(per["v2"]),
            "v2_over_static": ratio("v2"), "noise": ratio("static again")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(DEFAULT_MODELS))
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--ms", type=float, default=100.0, help="CPU milliseconds per session and round")
    a = ap.parse_args()
    print(f"{'model':<20} {'shape':<22} {'static ms':>9} {'v2 ms':>9} {'v2/static':>9} {'noise':>7}   "
          f"(wasmtime SIMD, CPU time, {a.rounds} rounds x {a.ms:.0f} ms, medians of paired ratios)")
    with tempfile.TemporaryDirectory() as d:
        for spec in a.models:
            name, shapes = _spec(spec)
            r = ab(name, shapes, a.rounds, a.ms, Path(d))
            shape = ",".join("x".join(map(str, s)) for s in r["shape"].values())
            print(f"{name:<20} {shape:<22} {r['static_ms']:>9.3f} {r['v2_ms']:>9.3f} {r['v2_over_static']:>9.3f} "
                  f"{r['noise']:>7.3f}", flush=True)


if __name__ == "__main__":
    main()
