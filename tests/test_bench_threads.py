"""bench/zoo.py's --threads table: the threaded speed-up's per-round spread (node_bench.mjs paired_min / paired_max)
beside its median, so a run whose rounds switched between a fast and a slow mode shows as a wide range."""
from __future__ import annotations


def _row(model: str, one_ms: float, two_ms: float, ratio: dict) -> dict:
    return {"model": model,
            "runtimes": {"edgepack-simd": {"median_ms": one_ms * 1.1}, "edgepack-relaxed": {"median_ms": one_ms},
                         "edgepack-threads": {"median_ms": two_ms}},
            "ratios": {"edgepack-relaxed/edgepack-threads": ratio}}


def test_zoo_threads_table_shows_the_rounds_spread() -> None:
    from bench.zoo import threads_table
    rows = [_row("bimodal", 3.0, 2.5, {"paired_median": 1.2, "paired_min": 1.05, "paired_max": 1.6}),
            _row("older json", 10.0, 5.0, {"paired_median": 2.0})]   # reports written before the spread was kept
    md = threads_table(rows, 2, "test machine").splitlines()
    assert "speed-up per round (min-max)" in md[0]
    assert md[2].startswith("| bimodal | 3.00 (relaxed) | 2.50 | 1.20 |") and "| 1.05-1.60 |" in md[2]
    assert md[3].startswith("| older json | 10.00 (relaxed) | 5.00 | 2.00 |") and "| 2.00 | n/a | n/a | n/a | n/a |  |" in md[3]
    assert "2 models; geometric-mean speed-up of 2 threads over our best 1-thread build: 1.55x" in md[-1]
