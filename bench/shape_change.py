"""What a change of input shape costs a version-2 bundle (run-time shapes), against one run of the model.

    python3 -m bench.shape_change [--model .cache/models/minilm_like_dyn.onnx] [--seq 128] [--seconds 3]

One bundle, one wasmtime instance (the SIMD build, what `package run` uses): runs at sequence `seq` repeated
(the same shape: resolving returns at once), runs alternating `seq` and `seq - 1` (each run re-resolves the
shapes, re-plans the arena and re-binds), and `ep_resolve` alone on alternating shapes. Interleaved in rounds
(A B A B ...), medians reported; the cost of a change is (alternating - repeated) per run, as a share of a run."""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from packager import load_bundle, package


def _timed(fn, seconds: float) -> float:
    """Median seconds per call over `seconds` of calls."""
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=".cache/models/minilm_like_dyn.onnx")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        b = load_bundle(package(a.model, target="web", out=Path(d) / "b", dynamic=True, verify=False))
        name = b.inputs[0]["name"]
        rng = np.random.default_rng(0)
        feeds = {s: {name: rng.integers(0, 8192, (1, s)).astype(np.int64)} for s in (a.seq, a.seq - 1)}
        session = b.session()
        flip = [a.seq]

        def same() -> None:
            b.run(feeds[a.seq])

        def change() -> None:
            flip[0] = a.seq - 1 if flip[0] == a.seq else a.seq
            b.run(feeds[flip[0]])

        def resolve_only() -> None:
            flip[0] = a.seq - 1 if flip[0] == a.seq else a.seq
            session.set_shapes([(1, flip[0])])

        _timed(same, a.seconds)   # warm-up by time
        rows = {"same": [], "change": [], "resolve": []}
        for _ in range(a.rounds):
            rows["same"].append(_timed(same, a.seconds / 2))
            rows["change"].append(_timed(change, a.seconds / 2))
            rows["resolve"].append(_timed(resolve_only, a.seconds / 4))
        med = {k: statistics.median(v) for k, v in rows.items()}
        cost = med["change"] - med["same"]
        print(f"{Path(a.model).stem} seq {a.seq}, wasmtime {session.vec}: run {med['same'] * 1e3:.2f} ms (same shape), "
              f"{med['change'] * 1e3:.2f} ms (shape changes every run): a change costs {cost * 1e3:.3f} ms = "
              f"{cost / med['same']:.1%} of a run; resolve + re-plan + bind alone {med['resolve'] * 1e3:.3f} ms = "
              f"{med['resolve'] / med['same']:.1%}")


if __name__ == "__main__":
    main()
