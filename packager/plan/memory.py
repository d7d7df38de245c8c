"""Memory planning: every arena tensor gets an offset; tensors whose lifetimes do not overlap share bytes.

Greedy by size (largest first), each placed at the lowest 64-aligned offset that does not collide with an
already placed block whose lifetime overlaps. Simple, and within a few percent of optimal on CNNs."""
from __future__ import annotations

from dataclasses import dataclass

ALIGN = 64


@dataclass
class Block:
    key: int            # caller's id
    size: int
    first: int          # first step that writes it
    last: int           # last step that reads it


def plan_memory(blocks: list[Block]) -> tuple[dict[int, int], int]:
    """Returns ({key: offset}, arena_bytes)."""
    placed: list[tuple[int, int, Block]] = []   # (offset, end, block)
    offsets: dict[int, int] = {}
    for b in sorted(blocks, key=lambda b: (-b.size, b.first, b.key)):
        size = (max(b.size, 1) + ALIGN - 1) // ALIGN * ALIGN
        live = sorted((o, e) for o, e, p in placed if not (p.last < b.first or b.last < p.first))
        off = 0
        for o, e in live:
            if off + size <= o:
                break
            off = max(off, (e + ALIGN - 1) // ALIGN * ALIGN)
        offsets[b.key] = off
        placed.append((off, off + size, b))
    arena = max((e for _, e, _ in placed), default=0)
    return offsets, (arena + ALIGN - 1) // ALIGN * ALIGN
