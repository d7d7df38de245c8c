"""Normalization: BatchNormalization -> BATCHNORM, LayerNormalization -> LAYERNORM,
Softmax / LogSoftmax -> SOFTMAX (opset differences resolved here into the reduced dim range)."""
from __future__ import annotations

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from ..plan.opcodes import Op
from .elementwise import in_f32


@lowers("BatchNormalization")
def lower_batchnorm(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    a = ctx.attrs(node)
    if int(a.get("training_mode", 0)) != 0:
        raise ctx.unsupported(node, "training_mode=1 is not inference")
    if any(o for o in node.output[1:]):
        raise ctx.unsupported(node, "the running mean/var and saved statistics outputs are training-only")
    if ctx.opset < 9 and int(a.get("spatial", 1)) != 1:
        raise ctx.unsupported(node, "spatial=0 is not supported")
    if len(node.input) != 5 or not all(node.input):
        raise ctx.unsupported(node, "expects the 5 inputs X, scale, B, mean, var")
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, [np.float32], [*node.input, y])
    xs = ctx.shape(x)
    if len(xs) < 2:
        raise ctx.unsupported(node, f"input rank {len(xs)} < 2")
    C = xs[1]
    for name in node.input[1:]:
        if int(np.prod(ctx.shape(name), dtype=np.int64)) != C:
            raise ctx.unsupported(node, f"'{name}' has shape {ctx.shape(name)}, expected {C} per-channel values")
    eps = float(a.get("epsilon", 1e-5))
    consts = [ctx.const(n) for n in node.input[1:]]
    if all(c is not None for c in consts):
        # Fold to y = x * a + b per channel (in float64, then rounded once).
        scale, bias, mean, var = (np.asarray(c, dtype=np.float64).reshape(-1) for c in consts)
        mul = scale / np.sqrt(var + np.float32(eps).astype(np.float64))
        add = bias - mean * mul
        ctx.emit(Op.BATCHNORM, [x, ctx.weight(mul.astype(np.float32), "bn_a"), ctx.weight(add.astype(np.float32), "bn_b")], [y])
    else:
        ctx.emit(Op.BATCHNORM, list(node.input), [y], [np.float32(eps)])


@lowers("LayerNormalization")
def lower_layernorm(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    a = ctx.attrs(node)
    x = node.input[0]
    xs = ctx.shape(x)
    r = len(xs)
    axis = int(a.get("axis", -1))
    if not -r <= axis < r:
        raise ctx.unsupported(node, f"axis {axis} out of range for rank {r}")
    axis %= r
    if int(a.get("stash_type", 1)) != 1:
        raise ctx.unsupported(node, "only stash_type=1 (float32 statistics) is supported")
    ctx.check_dtypes(node, [np.float32])
    norm_shape = tuple(xs[axis:])
    if not all(ctx.fixed(x, k) for k in range(axis, r)):   # scale and bias are stored for these extents
        raise ctx.unsupported(node, "normalized dims known only at run time")
    D = int(np.prod(norm_shape, dtype=np.int64))
    rows = int(np.prod(xs[:axis], dtype=np.int64))
    ins: list[str | None] = [x]
    for name in node.input[1:3]:
        if not name:
            ins.append(None)
            continue
        c = ctx.const(name)
        if c is not None:
            try:
                full = np.broadcast_to(np.asarray(c, dtype=np.float32), norm_shape)
            except ValueError:
                raise ctx.unsupported(node, f"'{name}' shape {c.shape} does not broadcast to {norm_shape}") from None
            ins.append(ctx.weight(np.ascontiguousarray(full).reshape(-1), "ln"))
        elif int(np.prod(ctx.shape(name), dtype=np.int64)) == D and len(ctx.shape(name)) <= len(norm_shape):
            ins.append(name)
        else:
            raise ctx.unsupported(node, f"'{name}' needs broadcasting and is not a constant")
    while len(ins) > 1 and ins[-1] is None:
        ins.pop()
    outs = [node.output[0]]
    extra = [o if o else "" for o in node.output[1:3]]
    while extra and not extra[-1]:
        extra.pop()
    for o in extra:
        if o and int(np.prod(ctx.shape(o), dtype=np.int64)) != rows:
            raise ctx.unsupported(node, f"output '{o}' has shape {ctx.shape(o)}, expected {rows} values")
        outs.append(o if o else ctx.temp((rows,), np.float32, "ln_unused"))
    ctx.emit(Op.LAYERNORM, ins, outs, [axis, np.float32(a.get("epsilon", 1e-5))])


@lowers("Softmax", "LogSoftmax")
def lower_softmax(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    if in_f32(ctx, node, lower_softmax):   # float16 / float64 through float32
        return
    ctx.check_dtypes(node, [np.float32], [x, y])
    r = len(ctx.shape(x))
    if r == 0:
        raise ctx.unsupported(node, "scalar input")
    a = ctx.attrs(node)
    axis = int(a.get("axis", 1 if ctx.opset < 13 else -1))
    if not -r <= axis < r:
        raise ctx.unsupported(node, f"axis {axis} out of range for rank {r}")
    axis %= r
    # opset < 13: the input is coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])]; opset >= 13: one axis.
    end = r if ctx.opset < 13 else axis + 1
    ctx.emit(Op.SOFTMAX, [x], [y], [1 if node.op_type == "LogSoftmax" else 0, axis, end])
