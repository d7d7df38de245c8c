"""Assembling a version-2 plan (docs/plan-format.md, "Version 2"): dims resolved at run time.

The lowering ran as for a static plan (at a probe shape); what differs here: dims that vary are written as -1,
the core places arena tensors itself from the lifetimes written in the plan, and shape arithmetic (the nodes
whose outputs feed a kernel's shape input: VIEW's target shape, EXPAND's shape, RANGE's bounds, ...) is
flagged to run while resolving, with its tensors in the values region."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import PackagerError
from . import layout
from .opcodes import Op

if TYPE_CHECKING:
    from ..lowering.context import LowerCtx, LoweredPlan

# Inputs whose values a kernel's shape function reads: (op, input indices).
SHAPE_INPUTS: dict[Op, tuple[int, ...]] = {
    Op.VIEW: (1,), Op.EXPAND: (1,), Op.RANGE: (0, 1, 2), Op.CONSTANT_OF_SHAPE: (0,),
    Op.AXIS: (1,),   # TopK's run-time k
    Op.REDUCE: (1,),   # run-time axes
    Op.SLICE: (1, 2, 3, 4), Op.PAD: (1, 3), Op.SPLIT: (1,),   # starts/ends/axes/steps, pads/axes, split sizes
}
VALUES_ALIGN = 8


def resolve_steps(ctx: "LowerCtx", value_inputs: frozenset[str] = frozenset()) -> set[int]:
    """The emitted steps that must run while resolving: producers of shape inputs, transitively (SHAPE reads
    only its input's dims, so the chain stops there; a value input is written by the host before resolving),
    and views of what they produce."""
    producer = {o: s for s, e in enumerate(ctx.emitted) for o in e.outputs}
    marked: set[int] = set()
    todo = [e.inputs[k] for e in ctx.emitted for k in SHAPE_INPUTS.get(Op(e.op), ()) if k < len(e.inputs) and e.inputs[k]]
    while True:
        while todo:
            name = todo.pop()
            while name not in producer and ctx.tensors[name].alias:
                name = ctx.tensors[name].alias
            if ctx.tensors[name].data is not None or name in value_inputs:   # a weight or a value input: known
                continue
            step = producer.get(name)
            if step is None:
                raise PackagerError(f"'{name}' sets a shape at run time but is computed from the input data, not "
                                    f"from its shape: give this model fixed shapes (--input-shape)")
            if step in marked:
                continue
            marked.add(step)
            e = ctx.emitted[step]
            if e.op != Op.SHAPE:
                todo += [i for i in e.inputs if i]
        # a view of a value is a value: its node runs while resolving too
        values = {o for s in marked for o in ctx.emitted[s].outputs}
        more = [s for s, e in enumerate(ctx.emitted) if s not in marked and e.op == Op.VIEW
                and e.inputs[0] and ctx.root(e.inputs[0]) in values]
        if not more:
            return marked
        todo = [ctx.emitted[s].outputs[0] for s in more]


def place_bodies(main: list) -> tuple[list, list[int], dict[int, list[tuple[int, int]]]]:
    """Every node in plan order with If/Loop/Scan bodies after the main sequence, in the order the core checks them
    (docs/plan-format.md, "Sub-plans"): at each control node, in plan order, all its bodies, then the bodies inside
    them, depth first. Returns (nodes, the main step each node lives at, control node's position -> its ranges)."""
    order, steps, ranges = list(main), list(range(len(main))), {}

    def place(at: int, step: int) -> None:
        rs = []
        for body in order[at].ctrl["bodies"]:
            rs.append((len(order), len(order) + len(body)))
            order.extend(body)
            steps.extend([step] * len(body))
        ranges[at] = rs
        for b, e in rs:
            for j in range(b, e):
                if order[j].ctrl:
                    place(j, step)

    for s, e in enumerate(main):
        if e.ctrl:
            place(s, s)
    return order, steps, ranges


def _check_run_dims(ctx: "LowerCtx", order: list, outputs: list[str]) -> None:
    """An If output whose dims its branch sets when it runs may only be a graph output: nothing may read it."""
    for name, why in getattr(ctx, "run_dims_why", {}).items():
        read = any(name in e.inputs or (e.ctrl and name in e.ctrl["body_out"]) for e in order) or \
            any(t.alias == name for t in ctx.tensors.values())
        if read or name not in outputs:
            raise PackagerError(f"{why}, and its condition is only known at run time: only a graph output may take "
                                f"its shape from the branch that runs (bind the condition with --const, or make the "
                                f"branches agree)")


def _ctrl_params(e, ranges: list[tuple[int, int]], ids: dict[str, int]) -> list[int]:
    c = e.ctrl
    words = [w for r in ranges for w in r]
    if e.op == Op.LOOP:
        words += c["head"]
    elif e.op == Op.SCAN:
        words += c["head"]
    words += [ids[n] if n else -1 for n in c["body_in"]]
    words += [ids[n] for n in c["body_out"]]
    return words + list(c["axes"])


def resolve_views(ctx: "LowerCtx", varying: dict[str, tuple[bool, ...]]) -> None:
    """A lowering's view (a tensor on another's bytes, no kernel) of run-time dims gets a VIEW node that gives it its
    source's dims, right after the source is written; a view that changes the dims cannot be resolved so."""
    producer = {o: s for s, e in enumerate(ctx.emitted) for o in e.outputs}
    n_prologue = sum(1 for e in ctx.emitted if e.flags & layout.NODE_PROLOGUE)
    pending = []
    for name, t in ctx.tensors.items():
        if t.alias is None or name in producer or not any(varying.get(name, ())):
            continue
        src = ctx.tensors[t.alias]
        if src.shape != t.shape or varying.get(t.alias) != varying.get(name):
            raise PackagerError(f"'{name}' views '{t.alias}' with other dims, which vary at run time: this lowering "
                                f"needs fixed shapes (--input-shape)")
        pending.append((max(producer.get(t.alias, -1) + 1, n_prologue), t.alias, name))
    from ..lowering.context import Emitted
    for at, src, name in sorted(pending, reverse=True):   # from the end, so earlier positions stay valid
        ctx.emitted.insert(at, Emitted(Op.VIEW, [src], [name], [VIEW_SAME_DIMS, 0, 0], 0, f"view of {src}"))


VIEW_SAME_DIMS = 3   # VIEW mode 3 (Unsqueeze) with no axis: the output has the input's dims


def assemble_dynamic(ctx: "LowerCtx", inputs: list[str], outputs: list[str], varying: dict[str, tuple[bool, ...]],
                     bounds: dict[str, list[tuple[int, int]]],
                     value_inputs: frozenset[str] = frozenset()) -> "LoweredPlan":
    """A version-2 plan from a lowering context. varying: tensor name -> per-dim flag (True = resolved at run time);
    bounds: graph input -> per-dim (min, max), max 0 = unbounded; value_inputs: graph inputs whose values decide
    shapes, in the values region (the host writes them before resolving)."""
    from ..lowering.context import LoweredPlan
    resolve_views(ctx, varying)
    names = list(ctx.tensors)
    ids = {n: i for i, n in enumerate(names)}
    n_steps = len(ctx.emitted)
    order, steps, ranges = place_bodies(ctx.emitted)
    n_total = len(order)   # lifetimes' "after the last node"
    _check_run_dims(ctx, order, outputs)
    resolve = resolve_steps(ctx, value_inputs)
    value_inputs = frozenset(n for n in value_inputs if n in ctx.tensors)
    for n in value_inputs:
        if any(varying.get(n, ())) or n in outputs:
            raise PackagerError(f"input '{n}' decides shapes by its values: it needs fixed dims and may not be an output")
    produced = {o for s in resolve for o in ctx.emitted[s].outputs} | value_inputs
    for v in produced:
        if any(varying.get(v, ())):
            raise PackagerError(f"shape arithmetic '{v}' has a run-time length: not supported yet")
        ctx.tensors[v].alias = None   # the values region holds its own copy
    values = {n for n in names if ctx.tensors[n].data is None and ctx.root(n) in produced}   # with their views
    from ..lowering.assemble import Lifetimes
    lifetimes = Lifetimes(ctx)
    touch, first, last = lifetimes.touch, lifetimes.first, lifetimes.last

    for name in inputs:
        if name not in values:
            touch(name, -1)
    for at, e in enumerate(order):
        step = steps[at]
        if at < n_steps and step in resolve:
            continue
        body_io = [*e.ctrl["body_in"], *e.ctrl["body_out"]] if e.ctrl else []
        for n in [*e.inputs, *e.outputs, *body_io]:   # a body's tensors live at its main control node's step
            if n and ctx.tensors[n].data is None and n not in values:
                touch(n, step)
        if e.flags & layout.NODE_PROLOGUE:
            for n in e.outputs:
                touch(n, -1)
                touch(n, n_total)
    for name in outputs:
        touch(name, n_total)
    weights = bytearray()
    w_off: dict[str, int] = {}
    v_off: dict[str, int] = {}
    values_bytes = 0
    for n in names:
        t = ctx.tensors[n]
        if t.data is not None:
            w_off[n] = len(weights)
            weights += t.data
            weights += b"\0" * (-len(weights) % layout.ALIGN)
        elif n in produced:
            v_off[n] = values_bytes
            values_bytes += -(-t.nbytes // VALUES_ALIGN) * VALUES_ALIGN
    for n in values - produced:
        v_off[n] = v_off[ctx.root(n)]
    tensors, life = [], []
    for n in names:
        t = ctx.tensors[n]
        var = varying.get(n, (False,) * len(t.shape))
        dims = tuple(-1 if v else d for d, v in zip(t.shape, var))
        flags = layout.TENSOR_DYNAMIC if any(var) else 0
        if t.data is not None:
            tensors.append(layout.TensorEntry(t.dtype, layout.WEIGHTS, w_off[n], t.nbytes, t.shape))
            life.append((-1, 0, 0))
        elif n in values:
            tensors.append(layout.TensorEntry(t.dtype, layout.VALUES, v_off[n], t.nbytes, t.shape))
            life.append((-1, 0, 0))
        else:
            tensors.append(layout.TensorEntry(t.dtype, layout.ARENA, 0, 0 if flags else t.nbytes, dims, flags))
            r = ctx.root(n)
            life.append((ids[r], first.get(r, -1), last.get(r, -1)) if r == n else (ids[r], 0, 0))
    nodes = [layout.NodeEntry(int(e.op), [ids[i] if i else -1 for i in e.inputs], [ids[o] for o in e.outputs],
                              _ctrl_params(e, ranges[s], ids) if e.ctrl else e.params, 0, 0,
                              e.flags | (layout.NODE_RESOLVE if s < n_steps and s in resolve else 0))
             for s, e in enumerate(order)]
    plan_bounds = []
    for name in inputs:
        var = varying.get(name, ())
        given = bounds.get(name, [])
        plan_bounds.append([(given[k] if k < len(given) and given[k] else (1, 0)) if v else (0, 0)
                            for k, v in enumerate(var or [False] * len(ctx.tensors[name].shape))])
    dyn = layout.Dynamic(life, plan_bounds, values_bytes, n_main=n_steps if len(order) > n_steps else 0)
    plan = layout.Plan(tensors, nodes, [ids[i] for i in inputs], [ids[o] for o in outputs], bytes(weights), 0,
                       dynamic=dyn)
    intermediates = sum(ctx.tensors[r].nbytes for r in first if ctx.tensors[r].data is None)
    return LoweredPlan(plan, names, [e.onnx_node for e in order], intermediates)
