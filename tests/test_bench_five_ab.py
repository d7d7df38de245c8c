"""bench/five_ab.py's pieces that run in CI time: a packaged bundle paired against itself through the real
bench/ab_pair.mjs (its output parsed into ratios), the table's verdict, and a clear error for a ref that is not a
commit. (The whole command builds a second tree's .wasm: minutes, a benchmark, run by hand.)"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.five_ab import LIMIT, base_tree, package_with, pair, table
from bench.run import node_flags
from tests.conftest import model_path

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(not shutil.which("node"), reason="needs node")
def test_pair_parses_ab_pair(tmp_path: Path) -> None:
    b = package_with(REPO, model_path("cifar10net"), tmp_path / "b")
    r = pair(b, b, "simd", rounds=2, ms=10, flags=node_flags())
    # figures of 2 rounds x 10 ms on a loaded machine: only that they were parsed, not what they are
    assert set(r) == {"base_ms", "new_ms", "ratio", "noise"} and all(0 < v < float("inf") for v in r.values())
    md = table([{"model": "cifar10net", "variant": "simd", **r}, {"model": "x", "variant": "simd", "error": "boom"}], "abc")
    assert f"| cifar10net | simd | {r['base_ms']:.3f} |" in md and "| x | simd | boom |" in md
    assert ("| yes |" if r["ratio"] <= LIMIT else "| **no** |") in md


def test_bad_base_is_an_error() -> None:
    with pytest.raises(SystemExit, match="^error: --base no-such-ref-xyz: not a commit"):
        base_tree("no-such-ref-xyz")
