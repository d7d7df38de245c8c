"""Assembly of a version-1 plan: tensor table, weights (64-aligned), arena offsets from tensor lifetimes."""
from __future__ import annotations

from ..plan import layout
from ..plan.memory import Block, plan_memory
from .context import LowerCtx, LoweredPlan, check_wasm32


class Lifetimes:
    """First and last node step at which each arena root is used (-1: before the first node; the node count:
    after the last). Shared by the version-1 and version-2 assemblies."""

    def __init__(self, ctx: LowerCtx) -> None:
        self.ctx = ctx
        self.first: dict[str, int] = {}
        self.last: dict[str, int] = {}

    def touch(self, name: str, step: int) -> None:
        r = self.ctx.root(name)
        self.first[r] = min(self.first.get(r, step), step)
        self.last[r] = max(self.last.get(r, step), step)


def assemble(ctx: LowerCtx, inputs: list[str], outputs: list[str]) -> LoweredPlan:
    names = list(ctx.tensors)
    ids = {n: i for i, n in enumerate(names)}
    n_steps = len(ctx.emitted)
    lifetimes = Lifetimes(ctx)
    touch, first, last = lifetimes.touch, lifetimes.first, lifetimes.last
    for name in inputs:
        touch(name, -1)
    for step, e in enumerate(ctx.emitted):
        for n in [*e.inputs, *e.outputs]:
            if n:
                touch(n, step)
        if e.flags & layout.NODE_PROLOGUE:   # written once at bind, read by every run
            for n in e.outputs:
                touch(n, -1)
                touch(n, n_steps)
    for name in outputs:
        touch(name, n_steps)
    weights = layout.Weights()   # in order, each 64-aligned: pieces joined only when the plan is written
    w_off: dict[str, int] = {}
    for n in names:
        t = ctx.tensors[n]
        if t.data is not None:
            w_off[n] = weights.add(t.data)
    blocks = [Block(ids[r], ctx.tensors[r].nbytes, first[r], last[r]) for r in first if ctx.tensors[r].data is None]
    scratch_key = {}
    for step, e in enumerate(ctx.emitted):
        if e.scratch_bytes:
            key = len(names) + step
            scratch_key[step] = key
            blocks.append(Block(key, e.scratch_bytes, step, step))
    offsets, arena = plan_memory(blocks)
    tensors = []
    for n in names:
        t = ctx.tensors[n]
        if t.data is not None:
            tensors.append(layout.TensorEntry(t.dtype, layout.WEIGHTS, w_off[n], t.nbytes, t.shape))
        else:
            r = ctx.root(n)
            off = offsets.get(ids[r], 0)   # never-used tensors get offset 0 with size checked below
            tensors.append(layout.TensorEntry(t.dtype, layout.ARENA, off, t.nbytes, t.shape))
            arena = max(arena, off + t.nbytes)
    nodes = [layout.NodeEntry(int(e.op), [ids[i] if i else -1 for i in e.inputs], [ids[o] for o in e.outputs],
                              e.params, offsets.get(scratch_key.get(s, -1), 0), e.scratch_bytes, e.flags)
             for s, e in enumerate(ctx.emitted)]
    arena = (arena + layout.ALIGN - 1) // layout.ALIGN * layout.ALIGN
    check_wasm32(arena, "the arena (all intermediate tensors at once)")
    plan = layout.Plan(tensors, nodes, [ids[i] for i in inputs], [ids[o] for o in outputs], weights, arena)
    intermediates = sum(ctx.tensors[r].nbytes for r in first if ctx.tensors[r].data is None) + \
        sum(e.scratch_bytes for e in ctx.emitted)
    return LoweredPlan(plan, names, [e.onnx_node for e in ctx.emitted], intermediates)
