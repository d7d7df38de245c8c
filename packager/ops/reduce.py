"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp -> REDUCE.

Axes come from the attribute (older opsets) or from a constant second input (ReduceSum >= 13, the
others >= 18); they are resolved here into a bit mask over the input dims. float16 and float64 through float32.
Axes fed at run time (a value input of a version-2 plan) go to the kernel as its second input: it derives the mask
from their values."""
from __future__ import annotations

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from ..plan.opcodes import Op
from ..plan.opspec import BinaryFn
from .elementwise import in_f32

KINDS = {"ReduceSum": 0, "ReduceMean": 1, "ReduceMax": 2, "ReduceMin": 3, "ReduceProd": 4, "ReduceL1": 5,
         "ReduceL2": 6, "ReduceSumSquare": 7, "ReduceLogSum": 8, "ReduceLogSumExp": 9}
R_LSE = 9


@lowers(*KINDS)
def lower_reduce(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    if in_f32(ctx, node, lower_reduce):   # float16 / float64: the float32 kernel, the result rounded back
        return
    boolean = node.op_type in ("ReduceMax", "ReduceMin") and ctx.dtype(x) == np.bool_   # any / all
    ctx.check_dtypes(node, [np.bool_] if boolean else [np.float32], [x, y])
    a = ctx.attrs(node)
    xs = ctx.shape(x)
    r = len(xs)
    axes_from_input = ctx.opset >= (13 if node.op_type == "ReduceSum" else 18)
    noop = int(a.get("noop_with_empty_axes", 0)) if axes_from_input else 0
    keepdims = int(a.get("keepdims", 1))
    if axes_from_input:
        axes = None
        if len(node.input) > 1 and node.input[1] and ctx.dynamic and ctx.const(node.input[1]) is None:
            # a value input: the kernel takes the axes from its values (known while the core resolves shapes)
            ctx.check_dtypes(node, [np.int64], [node.input[1]])
            if not boolean:
                ctx.emit(Op.REDUCE, [x, node.input[1]], [y], [KINDS[node.op_type], 0, noop])
                return
            # any / all through float32 0/1, then > 0.5: an empty set's -inf / +inf gives bool's false / true
            xf, yf = ctx.temp(xs, np.float32, "bool_f32"), ctx.temp(ctx.shape(y), np.float32, "bool_f32")
            ctx.emit(Op.CAST, [x], [xf])
            ctx.emit(Op.REDUCE, [xf, node.input[1]], [yf], [KINDS[node.op_type], 0, noop])
            ctx.emit(Op.BINARY, [yf, ctx.weight(np.array(0.5, np.float32), "half")], [y], [BinaryFn.GREATER])
            return
        if len(node.input) > 1 and node.input[1]:
            axes = [int(v) for v in np.asarray(ctx.require_const(node, node.input[1])[0]).reshape(-1)]
    else:
        axes = [int(v) for v in a["axes"]] if "axes" in a else None
    if not axes:
        axes = [] if noop else list(range(r))
    norm = []
    for ax in axes:
        if not -r <= ax < r:
            raise ctx.unsupported(node, f"axis {ax} out of range for rank {r}")
        norm.append(ax % r)
    if len(set(norm)) != len(norm):
        raise ctx.unsupported(node, f"repeated axes {axes}")
    mask = sum(1 << ax for ax in norm)
    want = tuple(1 if i in norm else d for i, d in enumerate(xs)) if keepdims else \
        tuple(d for i, d in enumerate(xs) if i not in norm)
    ys = ctx.shape(y)
    if tuple(ys) != want:
        raise ctx.unsupported(node, f"output shape {ys} differs from the computed {want}")
    kind = KINDS[node.op_type]
    out_numel = int(np.prod(ys, dtype=np.int64))
    if boolean:   # through float32 0/1 (exact); an empty set's -inf/+inf identity would not be bool's false/true
        if any(xs[ax] == 0 or not ctx.fixed(x, ax) for ax in norm):
            raise ctx.unsupported(node, "bool reduction over an empty or run-time-sized axis")
        xf, yf = ctx.temp(xs, np.float32, "bool_f32"), ctx.temp(ys, np.float32, "bool_f32")
        ctx.emit(Op.CAST, [x], [xf])
        ctx.emit(Op.REDUCE, [xf], [yf], [kind, mask])
        ctx.emit(Op.CAST, [yf], [y])
        return
    ctx.emit(Op.REDUCE, [x], [y], [kind, mask], scratch_bytes=4 * out_numel if kind == R_LSE else 0)
