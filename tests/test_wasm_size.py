"""Issue 17: every shipped .wasm build (the five of the web runtime) stays within the 200 KB download budget
(bench/browser_sizes.py's WASM_TARGET, bytes as shipped, before gzip)."""
from __future__ import annotations

import pytest

from bench.browser_sizes import WASM_TARGET
from packager.toolchain import WEB_RUNTIME, ensure_wasm


def test_five_builds():
    assert len(WEB_RUNTIME) == 5   # SIMD128, relaxed, threads, threads-relaxed, scalar


@pytest.mark.parametrize("name", sorted(WEB_RUNTIME))
def test_wasm_within_budget(name):
    path = ensure_wasm()[name]
    size = path.stat().st_size
    assert size <= WASM_TARGET, f"{name} is {size} bytes, over the {WASM_TARGET}-byte budget (docs/benchmarks.md, sizes)"
