"""Memory planning: live tensors never overlap, and lifetime reuse makes the arena smaller than the sum."""
from __future__ import annotations

import random

from packager.plan.memory import ALIGN, Block, plan_memory


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _assert_sound(planner, seed: int, trials: int, max_blocks: int, first_lo: int, first_hi: int, span: int) -> None:
    """Random lifetimes through `planner`: aligned, inside the arena, and blocks live at once never share bytes."""
    rng = random.Random(seed)
    for trial in range(trials):
        blocks = []
        for k in range(rng.randint(1, max_blocks)):
            first = rng.randint(first_lo, first_hi)
            blocks.append(Block(k, rng.randint(1, 5000), first, first + rng.randint(0, span)))
        offsets, arena = planner(blocks)
        for b in blocks:
            assert offsets[b.key] % ALIGN == 0 and offsets[b.key] + b.size <= arena
        for i, a in enumerate(blocks):
            for b in blocks[i + 1:]:
                if not (a.last < b.first or b.last < a.first):
                    assert not _overlap((offsets[a.key], offsets[a.key] + a.size), (offsets[b.key], offsets[b.key] + b.size))


def test_live_blocks_never_share_bytes() -> None:
    _assert_sound(plan_memory, seed=7, trials=50, max_blocks=40, first_lo=-1, first_hi=30, span=8)


def test_chain_reuses_memory() -> None:
    # a chain of 10 equal tensors, each read only by the next step: two buffers suffice
    blocks = [Block(k, 1024, k, k + 1) for k in range(10)]
    _, arena = plan_memory(blocks)
    assert arena == 2 * 1024


def test_long_chain_plans_in_seconds() -> None:
    # the old planner compared each block with every placed one: a 200k-tensor chain ran > 600 s
    import time
    blocks = [Block(k, 1024 + (k % 7) * 64, k, k + 1) for k in range(200_000)]
    t = time.perf_counter()
    offsets, arena = plan_memory(blocks)
    assert time.perf_counter() - t < 20
    assert arena <= 3 * (1024 + 6 * 64) and len(offsets) == len(blocks)   # reuse: not 200k buffers


def test_everything_live_at_once_is_bounded() -> None:
    # n tensors all live together: n^2/2 overlapping pairs, beyond the greedy's budget: the sweep plans it
    import time
    n = 3000
    blocks = [Block(k, 64 * (1 + k % 5), 0, n) for k in range(n)]
    t = time.perf_counter()
    offsets, arena = plan_memory(blocks)
    assert time.perf_counter() - t < 20
    assert arena == sum(64 * (1 + k % 5) for k in range(n))
    spans = sorted((offsets[b.key], offsets[b.key] + b.size) for b in blocks)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_sweep_planner_is_sound() -> None:
    # the O(n log n) sweep on its own (what large graphs get): live blocks never share bytes
    from packager.plan.memory import _sweep
    _assert_sound(_sweep, seed=11, trials=100, max_blocks=60, first_lo=0, first_hi=40, span=10)
