"""InstanceNormalization, GroupNormalization, LRN and LpNormalization as existing kernels (no C code of their own).

InstanceNormalization: LAYERNORM over the spatial dims (one mean/variance per (n, c)), then the per-channel
scale and bias (BINARY). GroupNormalization: X viewed as [N, G, C/G * spatial], LAYERNORM over the last dim,
viewed back, then the per-channel scale and bias. LRN: x^2 summed over the channel window by an average POOL
(count_include_pad, so the divisor is `size`), then (bias + alpha * avg)^-beta * x. LpNormalization: REDUCE L1 / L2
and a DIV."""
from __future__ import annotations

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from ..plan.opcodes import Op
from ..plan.opspec import BinaryFn, UnaryFn
from . import conv
from .data import _axis, view
from .reduce import KINDS

R_L1, R_L2 = KINDS["ReduceL1"], KINDS["ReduceL2"]


def _per_channel(ctx: LowerCtx, node: onnx.NodeProto, name: str, c: int, rank: int) -> str:
    """`name` (C values) as a [C, 1, ...] tensor for BINARY."""
    shape = (c,) + (1,) * (rank - 2)
    const = ctx.const(name)
    if const is not None:
        v = np.asarray(const, np.float32).reshape(-1)
        if v.size != c:
            raise ctx.unsupported(node, f"'{name}' holds {v.size} values, expected {c}")
        return ctx.weight(v.reshape(shape), "norm_c")
    if int(np.prod(ctx.shape(name), dtype=np.int64)) != c:
        raise ctx.unsupported(node, f"'{name}' must be a constant or hold {c} per-channel values")
    return view(ctx, name, shape)


def _normalize_rows(ctx: LowerCtx, node: onnx.NodeProto, x: str, rows_shape: tuple[int, ...], eps: float) -> str:
    """LAYERNORM of `x` viewed as rows_shape over its last axis, returned viewed back to x's shape."""
    xs = ctx.shape(x)
    t = ctx.temp(rows_shape, np.float32, "norm_rows")
    ctx.emit(Op.LAYERNORM, [view(ctx, x, rows_shape)], [t], [len(rows_shape) - 1, np.float32(eps)])
    return view(ctx, t, xs)


def _scale_bias(ctx: LowerCtx, node: onnx.NodeProto, t: str, scale: str, bias: str, y: str) -> None:
    xs = ctx.shape(t)
    m = ctx.temp(xs, np.float32, "norm_scaled")
    ctx.emit(Op.BINARY, [t, scale], [m], [BinaryFn.MUL])
    ctx.emit(Op.BINARY, [m, bias], [y], [BinaryFn.ADD])


def _static(ctx: LowerCtx, node: onnx.NodeProto, x: str) -> tuple[int, ...]:
    xs = ctx.shape(x)
    if len(xs) < 3:
        raise ctx.unsupported(node, f"input rank {len(xs)} < 3")
    if not all(ctx.fixed(x, k) for k in range(1, len(xs))):
        raise ctx.unsupported(node, "channel and spatial dims must be static")
    return xs


@lowers("InstanceNormalization")
def lower_instance_norm(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, scale, bias = node.input[:3]
    y = node.output[0]
    ctx.check_dtypes(node, [np.float32])
    xs = _static(ctx, node, x)
    eps = float(ctx.attrs(node).get("epsilon", 1e-5))
    n, c, sp = xs[0], xs[1], int(np.prod(xs[2:], dtype=np.int64))
    t = _normalize_rows(ctx, node, x, (n, c, sp), eps)
    _scale_bias(ctx, node, t, _per_channel(ctx, node, scale, c, len(xs)), _per_channel(ctx, node, bias, c, len(xs)), y)


@lowers("GroupNormalization")
def lower_group_norm(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, scale, bias = node.input[:3]
    y = node.output[0]
    ctx.check_dtypes(node, [np.float32])
    a = ctx.attrs(node)
    xs = _static(ctx, node, x)
    if int(a.get("stash_type", 1)) != 1:
        raise ctx.unsupported(node, "only stash_type=1 (float32 statistics) is supported")
    g = int(a["num_groups"])
    n, c = xs[0], xs[1]
    if g < 1 or c % g:
        raise ctx.unsupported(node, f"num_groups={g} does not divide the {c} channels")
    # (opset 18's GroupNormalization, scaled per group, is deprecated: the model loader refuses it)
    t = _normalize_rows(ctx, node, x, (n, g, int(np.prod(xs[1:], dtype=np.int64)) // g), float(a.get("epsilon", 1e-5)))
    _scale_bias(ctx, node, t, _per_channel(ctx, node, scale, c, len(xs)), _per_channel(ctx, node, bias, c, len(xs)), y)


@lowers("LRN")
def lower_lrn(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, [np.float32])
    a = ctx.attrs(node)
    xs = _static(ctx, node, x)
    size = int(a["size"])
    if size < 1:
        raise ctx.unsupported(node, f"size={size} must be positive")
    alpha, beta, bias = float(a.get("alpha", 1e-4)), float(a.get("beta", 0.75)), float(a.get("bias", 1.0))
    n, c, sp = xs[0], xs[1], int(np.prod(xs[2:], dtype=np.int64))
    sq = ctx.temp(xs, np.float32, "lrn_sq")
    ctx.emit(Op.BINARY, [x, x], [sq], [BinaryFn.MUL])
    # channels c - floor((size-1)/2) .. c + ceil((size-1)/2): a [size, 1] window over [N, 1, C, spatial]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    avg = ctx.temp((n, 1, c, sp), np.float32, "lrn_avg")
    ctx.emit(Op.POOL, [view(ctx, sq, (n, 1, c, sp))], [avg], [1, 2, 1, 0, size, 1, 1, lo, hi, 1, 1, 1, 0, 0, 0],
             scratch_bytes=4 * (sp + 8) * conv.THREAD_SLOTS)
    t1, t2 = (ctx.temp(xs, np.float32, "lrn_den") for _ in range(2))   # (bias + alpha * sum / size)^-beta
    ctx.emit(Op.BINARY, [view(ctx, avg, xs), ctx.weight(np.array(alpha, np.float32), "alpha")], [t1], [BinaryFn.MUL])
    ctx.emit(Op.BINARY, [t1, ctx.weight(np.array(bias, np.float32), "bias")], [t2], [BinaryFn.ADD])
    if beta == 0.75:   # Caffe's LRN (AlexNet, GoogLeNet, ZFNet): x / (sqrt(t) * sqrt(sqrt(t))), vector square roots
        r2, r4, r34 = (ctx.temp(xs, np.float32, "lrn_root") for _ in range(3))   # instead of a scalar powf each
        ctx.emit(Op.UNARY, [t2], [r2], [UnaryFn.SQRT])
        ctx.emit(Op.UNARY, [r2], [r4], [UnaryFn.SQRT])
        ctx.emit(Op.BINARY, [r2, r4], [r34], [BinaryFn.MUL])
        ctx.emit(Op.BINARY, [x, r34], [y], [BinaryFn.DIV])
        return
    t3 = ctx.temp(xs, np.float32, "lrn_den")
    ctx.emit(Op.UNARY, [t2], [t3], [UnaryFn.POW, -beta])
    ctx.emit(Op.BINARY, [x, t3], [y], [BinaryFn.MUL])


@lowers("LpNormalization")
def lower_lp_norm(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """x / ||x||_p along one axis: REDUCE (L1 or L2, the axis kept as 1), the norm raised to the smallest positive
    float (a zero norm means a zero row, which then divides to 0 as onnx's reference has it), BINARY DIV."""
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, [np.float32])
    a = ctx.attrs(node)
    xs = ctx.shape(x)
    p = int(a.get("p", 2))
    if p not in (1, 2) or not xs:
        raise ctx.unsupported(node, f"p={p} on an input of rank {len(xs)}: p is 1 or 2, the input not a scalar")
    axis = _axis(ctx, node, int(a.get("axis", -1)), len(xs))
    norm = ctx.temp(tuple(1 if i == axis else d for i, d in enumerate(xs)), np.float32, "lp_norm")
    ctx.emit(Op.REDUCE, [x], [norm], [R_L1 if p == 1 else R_L2, 1 << axis])
    safe = ctx.temp(ctx.shape(norm), np.float32, "lp_safe")
    tiny = ctx.weight(np.array(np.nextafter(np.float32(0), np.float32(1))), "tiny")
    ctx.emit(Op.BINARY, [norm, tiny], [safe], [BinaryFn.MAX])
    ctx.emit(Op.BINARY, [x, safe], [y], [BinaryFn.DIV])
