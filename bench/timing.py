"""The timing loop the Python-side benchmarks share (bench/run.py's native onnxruntime, bench/int8_bench.py):
a warm-up by time per runner, then rounds in which each runner runs alone for a slice of time, in turn, so that
machine-wide slowdowns hit every runner alike (as bench/node_bench.mjs does in Node)."""
from __future__ import annotations

import time
from typing import Callable


def interleaved_ms(runners: dict[str, Callable[[], object]], seconds: float, rounds: int,
                   slice_s: float) -> dict[str, list[float]]:
    """Wall ms of every timed call, per runner: each warmed up for `seconds`, then `rounds` rounds of
    `slice_s` seconds per runner (at least one call each)."""
    for fn in runners.values():
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            fn()
    times: dict[str, list[float]] = {k: [] for k in runners}
    for _ in range(rounds):
        for k, fn in runners.items():
            end = time.perf_counter() + slice_s
            while True:
                t = time.perf_counter()
                fn()
                times[k].append((time.perf_counter() - t) * 1e3)
                if time.perf_counter() >= end:
                    break
    return times
