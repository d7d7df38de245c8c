"""Memory planning: live tensors never overlap, and lifetime reuse makes the arena smaller than the sum."""
from __future__ import annotations

import random

from packager.plan.memory import ALIGN, Block, plan_memory


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_live_blocks_never_share_bytes() -> None:
    rng = random.Random(7)
    for trial in range(50):
        blocks = []
        for k in range(rng.randint(1, 40)):
            first = rng.randint(-1, 30)
            blocks.append(Block(k, rng.randint(1, 5000), first, first + rng.randint(0, 8)))
        offsets, arena = plan_memory(blocks)
        for b in blocks:
            assert offsets[b.key] % ALIGN == 0 and offsets[b.key] + b.size <= arena
        for i, a in enumerate(blocks):
            for b in blocks[i + 1:]:
                if not (a.last < b.first or b.last < a.first):
                    assert not _overlap((offsets[a.key], offsets[a.key] + a.size), (offsets[b.key], offsets[b.key] + b.size))


def test_chain_reuses_memory() -> None:
    # a chain of 10 equal tensors, each read only by the next step: two buffers suffice
    blocks = [Block(k, 1024, k, k + 1) for k in range(10)]
    _, arena = plan_memory(blocks)
    assert arena == 2 * 1024
