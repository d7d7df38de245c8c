"""NonZero, NonMaxSuppression, Unique: outputs whose extent depends on the input's values (wasm_kernels/src/kernels/
datadep.c; docs/plan-format.md, "Data-dependent output dims"). analyze gave each output its capacity
(packager/data_dependent.py); the kernel sets the actual extent when it runs, so the plan is a version-2 one
(packager/lower.py). A constant input was folded by analyze, or, too large to fold, becomes a weight here."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx

from ..data_dependent import nms_per_class
from ..lowering import LowerCtx, lowers
from ..plan.opcodes import Op

# numbers and bool (not strings, nor the 8-bit-and-smaller float and 2/4-bit integer codes): the kernels' dtypes
DTYPES = (np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.int16, np.int32, np.int64, np.uint8,
          np.uint16, np.uint32, np.uint64, np.bool_)


def _top_level(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """In a body it was refused by packager/ops/control.py; with run-time input dims, here."""
    if ctx.graph.dynamic:
        raise ctx.unsupported(node, "its output extent is set when it runs, which the runtime supports with fixed "
                                    "input shapes only so far: give them with --input-shape")


def _dtypes(ctx: LowerCtx, node: onnx.NodeProto, allowed, name: str) -> None:
    if ctx.dtype(name) not in {np.dtype(a) for a in allowed}:
        raise ctx.unsupported(node, f"input '{name}' has dtype {ctx.dtype(name)}; supported: "
                                    f"{', '.join(np.dtype(a).name for a in allowed)}")


@lowers("NonZero")
def lower_nonzero(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    c = ctx.const(x)
    if c is not None:   # a constant too large to fold: its result is a weight
        ctx.alias(y, ctx.weight(np.array(np.nonzero(np.asarray(c)), dtype=np.int64), "nonzero"))
        return
    _top_level(ctx, node)
    _dtypes(ctx, node, DTYPES, x)
    ctx.emit(Op.NONZERO, [x], [y], [])


@lowers("NonMaxSuppression")
def lower_non_max_suppression(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    _top_level(ctx, node)
    ins = list(node.input) + [""] * (5 - len(node.input))
    boxes, scores = ins[0], ins[1]
    for name, dt in [(boxes, np.float32), (scores, np.float32), (ins[2], np.int64), (ins[3], np.float32),
                     (ins[4], np.float32)]:
        if name and ctx.dtype(name) != np.dtype(dt):
            raise ctx.unsupported(node, f"input '{name}' has dtype {ctx.dtype(name)}, expected {np.dtype(dt).name}")
        if name and name not in (boxes, scores) and int(np.prod(ctx.shape(name))) != 1:
            raise ctx.unsupported(node, f"input '{name}' has shape {list(ctx.shape(name))}: one value expected")
    bs, ss = ctx.shape(boxes), ctx.shape(scores)
    if len(bs) != 3 or bs[2] != 4 or len(ss) != 3 or ss[0] != bs[0] or ss[2] != bs[1]:
        raise ctx.unsupported(node, f"boxes {list(bs)} and scores {list(ss)}: expected [B, N, 4] and [B, C, N]")
    center = int(ctx.attrs(node).get("center_point_box", 0))
    if center not in (0, 1):
        raise ctx.unsupported(node, f"center_point_box={center}: 0 or 1 expected")
    per_class = -1 if ins[2] and ctx.const(ins[2]) is None else nms_per_class(node, ctx.graph.consts, bs[1])
    inputs = [boxes, scores, *ins[2:]]
    while inputs and not inputs[-1]:
        inputs.pop()
    ctx.emit(Op.NON_MAX_SUPPRESSION, [i or None for i in inputs], [node.output[0]], [center, per_class])


@lowers("Unique")
def lower_unique(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    _top_level(ctx, node)
    x = node.input[0]
    _dtypes(ctx, node, DTYPES, x)
    a = ctx.attrs(node)
    rank = len(ctx.shape(x))
    axis = a.get("axis")
    if axis is not None and not -rank <= int(axis) < rank:
        raise ctx.unsupported(node, f"axis={axis} is outside the input's rank {rank}")
    axis = -1 if axis is None else int(axis) % rank
    n = int(np.prod(ctx.shape(x))) if axis < 0 else ctx.shape(x)[axis]
    outs = list(node.output) + [""] * (4 - len(node.output))
    shapes = [(n,) if axis < 0 else ctx.shape(x), (n,), (n,), (n,)]
    outs = [o or ctx.temp(s, ctx.dtype(x) if k == 0 else np.int64, "unique_unused") for k, (o, s) in
            enumerate(zip(outs, shapes))]
    ctx.emit(Op.UNIQUE, [x], outs, [axis, int(a.get("sorted", 1))])
