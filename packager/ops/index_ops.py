"""The long tail of index ops real models and the ONNX conformance cases use.

AXIS (wasm_kernels/src/kernels/axis_ops.c): ArgMax, ArgMin, Hardmax, TopK, CumSum, CumProd along one axis
(float16 / float64 CumSum and CumProd through float32).
SCATTER: ScatterElements (and the older Scatter), ScatterND, with their reductions. GATHER_ND: GatherND.
Rewrites onto existing kernels (no C code): Trilu -> WHERE with a constant mask, OneHot -> compare + WHERE,
Compress with a constant condition -> GATHER with constant indices, ReverseSequence with constant
sequence_lens -> GATHER (GatherElements) with constant indices. (NonZero: packager/ops/datadep.py.)"""
from __future__ import annotations

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from ..plan.opcodes import Op
from ..plan.opspec import BinaryFn
from .data import DATA_DTYPES, _axis, view
from .elementwise import in_f32

NUM_DTYPES = (np.float32, np.int32, np.int64, np.int8, np.uint8)
AX_ARGMAX, AX_ARGMIN, AX_HARDMAX, AX_TOPK, AX_CUMSUM, AX_CUMPROD = range(6)
REDUCTIONS = {"none": 0, "add": 1, "mul": 2, "max": 3, "min": 4}


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _scalar_const(ctx: LowerCtx, node: onnx.NodeProto, name: str, what: str) -> int:
    v = np.asarray(ctx.require_const(node, name)[0]).reshape(-1)
    if v.size != 1:
        raise ctx.unsupported(node, f"{what} must hold one value, not {v.size}")
    return int(v[0])


@lowers("ArgMax", "ArgMin")
def lower_arg(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, NUM_DTYPES, [x])
    ctx.check_dtypes(node, [np.int64], [y])
    a = ctx.attrs(node)
    xs = ctx.shape(x)
    if not xs:
        raise ctx.unsupported(node, "scalar input")
    axis = _axis(ctx, node, int(a.get("axis", 0)), len(xs))
    keep = int(a.get("keepdims", 1))
    last = int(a.get("select_last_index", 0))
    if keep not in (0, 1) or last not in (0, 1):
        raise ctx.unsupported(node, f"keepdims={keep}, select_last_index={last}: each must be 0 or 1")
    if xs[axis] == 0 and ctx.fixed(x, axis):
        raise ctx.unsupported(node, "the reduced axis is empty")
    want = tuple(1 if i == axis else d for i, d in enumerate(xs)) if keep else xs[:axis] + xs[axis + 1:]
    if ctx.shape(y) != want:
        raise ctx.unsupported(node, f"output shape {ctx.shape(y)} differs from the computed {want}")
    ctx.emit(Op.AXIS, [x], [y], [AX_ARGMAX if node.op_type == "ArgMax" else AX_ARGMIN, axis, last, 0])


@lowers("Hardmax")
def lower_hardmax(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, NUM_DTYPES, [x, y])
    xs = ctx.shape(x)
    if not xs:
        raise ctx.unsupported(node, "scalar input")
    axis = _axis(ctx, node, int(ctx.attrs(node).get("axis", 1 if ctx.opset < 13 else -1)), len(xs))
    if ctx.opset >= 13 or axis == len(xs) - 1:
        ctx.emit(Op.AXIS, [x], [y], [AX_HARDMAX, axis, 0, 0])
        return
    # opset < 13: the input is coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])]
    if not ctx.fixed(x):
        raise ctx.unsupported(node, "opset < 13 Hardmax over several dims needs static shapes")
    shape2 = (int(np.prod(xs[:axis], dtype=np.int64)), int(np.prod(xs[axis:], dtype=np.int64)))
    t = ctx.temp(shape2, ctx.dtype(x), "hardmax")
    ctx.emit(Op.AXIS, [view(ctx, x, shape2)], [t], [AX_HARDMAX, 1, 0, 0])
    ctx.alias(y, t)


@lowers("TopK")
def lower_topk(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x = node.input[0]
    ctx.check_dtypes(node, NUM_DTYPES, [x])
    a = ctx.attrs(node)
    xs = ctx.shape(x)
    if not xs:
        raise ctx.unsupported(node, "scalar input")
    axis = _axis(ctx, node, int(a.get("axis", -1)), len(xs))
    largest = int(a.get("largest", 1))
    if largest not in (0, 1) or int(a.get("sorted", 1)) not in (0, 1):
        raise ctx.unsupported(node, "largest and sorted must be 0 or 1")
    # sorted=0 allows any order: the kernel's sorted order is one of them.
    kin = None
    if ctx.opset < 10:
        k = int(a["k"])
    elif ctx.const(node.input[1]) is not None or not ctx.dynamic:
        k = _scalar_const(ctx, node, node.input[1], "K")
    else:
        k, kin = -1, node.input[1]   # read by the shape function at run time
        ctx.check_dtypes(node, [np.int64], [kin])
    if k > xs[axis] and ctx.fixed(x, axis):
        raise ctx.unsupported(node, f"k={k} exceeds the axis extent {xs[axis]}")
    if k < -1:
        raise ctx.unsupported(node, f"k={k} is negative")
    vals, idx = node.output[0], node.output[1] if len(node.output) > 1 else ""
    oshape = tuple(k if i == axis else d for i, d in enumerate(xs)) if k >= 0 else ctx.shape(vals or idx)
    vals = vals or ctx.temp(oshape, ctx.dtype(x), "topk_values")
    idx = idx or ctx.temp(oshape, np.int64, "topk_indices")
    ctx.check_dtypes(node, [ctx.dtype(x)], [vals])
    ctx.check_dtypes(node, [np.int64], [idx])
    if k >= 0 and (ctx.shape(vals) != oshape or ctx.shape(idx) != oshape):
        raise ctx.unsupported(node, f"output shapes {ctx.shape(vals)}, {ctx.shape(idx)} differ from {oshape}")
    ctx.emit(Op.AXIS, [x, kin] if kin else [x], [vals, idx], [AX_TOPK, axis, largest, k], scratch_bytes=4 * xs[axis])


@lowers("CumSum", "CumProd")
def lower_cumulative(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    if in_f32(ctx, node, lower_cumulative):
        return
    ctx.check_dtypes(node, [np.float32, np.int32, np.int64], [x, y])
    a = ctx.attrs(node)
    xs = ctx.shape(x)
    if not xs:
        raise ctx.unsupported(node, "scalar input")
    axis = _axis(ctx, node, _scalar_const(ctx, node, node.input[1], "axis"), len(xs))
    ex, rev = int(a.get("exclusive", 0)), int(a.get("reverse", 0))
    if ex not in (0, 1) or rev not in (0, 1):
        raise ctx.unsupported(node, "exclusive and reverse must be 0 or 1")
    ctx.emit(Op.AXIS, [x], [y], [AX_CUMSUM if node.op_type == "CumSum" else AX_CUMPROD, axis, ex, rev])


def _const_indices_in_range(ctx: LowerCtx, node: onnx.NodeProto, idx: str, limits) -> None:
    """Constant indices out of range are refused now rather than at run time (limits broadcast against idx)."""
    c = ctx.const(idx)
    if c is not None and c.size and (np.any(c < -limits) or np.any(c >= limits)):
        raise ctx.unsupported(node, "constant indices out of range")


@lowers("ScatterElements", "Scatter", "ScatterND")
def lower_scatter(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    d, idx, upd = node.input[:3]
    y = node.output[0]
    a = ctx.attrs(node)
    red_s = _s(a.get("reduction", "none"))
    if red_s not in REDUCTIONS:
        raise ctx.unsupported(node, f"reduction={red_s!r}")
    red = REDUCTIONS[red_s]
    ctx.check_dtypes(node, DATA_DTYPES if red == 0 else NUM_DTYPES, [d, upd, y])
    ctx.check_dtypes(node, [np.int32, np.int64], [idx])
    if not ctx.dtype(d) == ctx.dtype(upd) == ctx.dtype(y):
        raise ctx.unsupported(node, "data, updates and output must share one dtype")
    ds, ids, us = ctx.shape(d), ctx.shape(idx), ctx.shape(upd)
    if not ds or ctx.shape(y) != ds:
        raise ctx.unsupported(node, f"output shape {ctx.shape(y)} must be the data's {ds} (rank >= 1)")
    if node.op_type == "ScatterND":
        q = ids[-1] if ids else -1
        if q < 0 or q > len(ds) or tuple(us) != tuple(ids[:-1]) + tuple(ds[q:]):
            raise ctx.unsupported(node, f"indices {ids} and updates {us} do not fit data {ds}")
        _const_indices_in_range(ctx, node, idx, np.asarray(ds[:q]))
        ctx.emit(Op.SCATTER, [d, idx, upd], [y], [1, 0, red])
        return
    axis = _axis(ctx, node, int(a.get("axis", 0)), len(ds))
    if ids != us or len(ids) != len(ds) or any(ids[k] > ds[k] for k in range(len(ds)) if k != axis):
        raise ctx.unsupported(node, f"indices {ids} and updates {us} do not fit data {ds}")
    _const_indices_in_range(ctx, node, idx, ds[axis])
    ctx.emit(Op.SCATTER, [d, idx, upd], [y], [0, axis, red])


@lowers("GatherND")
def lower_gather_nd(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    d, idx, y = node.input[0], node.input[1], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [d, y])
    ctx.check_dtypes(node, [np.int32, np.int64], [idx])
    b = int(ctx.attrs(node).get("batch_dims", 0))
    ds, ids = ctx.shape(d), ctx.shape(idx)
    if not ids or not 0 <= b < min(len(ds), len(ids)) or b + ids[-1] > len(ds) or tuple(ids[:b]) != tuple(ds[:b]):
        raise ctx.unsupported(node, f"batch_dims={b} with indices {ids} does not fit data {ds}")
    want = tuple(ids[:-1]) + tuple(ds[b + ids[-1]:])
    if ctx.shape(y) != want:
        raise ctx.unsupported(node, f"output shape {ctx.shape(y)} differs from the computed {want}")
    _const_indices_in_range(ctx, node, idx, np.asarray(ds[b:b + ids[-1]]))
    ctx.emit(Op.GATHER_ND, [d, idx], [y], [b])


@lowers("Trilu")
def lower_trilu(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, y])
    xs = ctx.shape(x)
    if len(xs) < 2:
        raise ctx.unsupported(node, f"input rank {len(xs)} < 2")
    if not (ctx.fixed(x, -1) and ctx.fixed(x, -2)):
        raise ctx.unsupported(node, "the last two dims must be static (the mask is a constant of their size)")
    upper = int(ctx.attrs(node).get("upper", 1))
    rows, cols = xs[-2], xs[-1]
    zero = ctx.weight(np.zeros((), ctx.dtype(x)), "trilu_zero")
    kin = node.input[1] if len(node.input) > 1 and node.input[1] else ""
    if kin and ctx.const(kin) is None:   # k fed at run time: keep where col - row >= k (upper) or <= k (lower)
        ctx.check_dtypes(node, [np.int64], [kin])
        if ctx.shape(kin) not in ((), (1,)):
            raise ctx.unsupported(node, f"k of shape {ctx.shape(kin)} is not a scalar")
        diag = np.arange(cols, dtype=np.int64)[None, :] - np.arange(rows, dtype=np.int64)[:, None]
        keep = ctx.temp((rows, cols), np.bool_, "trilu_keep")
        fn = BinaryFn.GREATER_EQUAL if upper else BinaryFn.LESS_EQUAL
        ctx.emit(Op.BINARY, [ctx.weight(diag, "trilu_diag"), kin], [keep], [int(fn)])
        ctx.emit(Op.WHERE, [keep, x, zero], [y])
        return
    k = _scalar_const(ctx, node, kin, "k") if kin else 0
    keep = np.ones((rows, cols), np.bool_)
    keep = np.triu(keep, k) if upper else np.tril(keep, k)   # where X is kept, zero elsewhere
    ctx.emit(Op.WHERE, [ctx.weight(keep, "trilu_mask"), x, zero], [y])


@lowers("OneHot")
def lower_onehot(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    ind, depth_n, values = node.input[:3]
    y = node.output[0]
    ctx.check_dtypes(node, NUM_DTYPES, [ind])
    ctx.check_dtypes(node, [np.float32, np.int64, np.int32, np.bool_, np.uint8, np.int8], [values, y])
    if ctx.dynamic and ctx.const(depth_n) is None:
        return _onehot_run_time_depth(ctx, node)
    depth_v = np.asarray(ctx.require_const(node, depth_n)[0]).reshape(-1)
    if depth_v.size != 1:
        raise ctx.unsupported(node, "depth must hold one value")
    depth = int(depth_v[0])   # a float depth is truncated, as the reference does
    if depth < 1:
        raise ctx.unsupported(node, f"depth={depth} must be positive")
    ins = ctx.shape(ind)
    r = len(ins) + 1
    axis = _axis(ctx, node, int(ctx.attrs(node).get("axis", -1)), r)
    want = tuple(ins[:axis]) + (depth,) + tuple(ins[axis:])
    if ctx.shape(y) != want or ctx.shape(values) not in ((2,),) or ctx.dtype(values) != ctx.dtype(y):
        raise ctx.unsupported(node, f"output {ctx.shape(y)} / values {ctx.shape(values)} do not fit {want} / (2,)")
    idt = ctx.dtype(ind)
    if idt.kind != "i":   # float / uint8 indices: to int64 (truncating, as the reference casts)
        t = ctx.temp(ins, np.int64, "onehot_idx")
        ctx.emit(Op.CAST, [ind], [t])
        ind, idt = t, np.dtype(np.int64)
    # negative indices count from depth: idx + depth where idx < 0; anything outside [0, depth) matches no class
    neg = ctx.temp(ins, np.bool_, "onehot_neg")
    ctx.emit(Op.BINARY, [ind, ctx.weight(np.zeros((), idt), "zero")], [neg], [BinaryFn.LESS])
    shifted = ctx.temp(ins, idt, "onehot_shift")
    ctx.emit(Op.BINARY, [ind, ctx.weight(np.array(depth, idt), "depth")], [shifted], [BinaryFn.ADD])
    norm = ctx.temp(ins, idt, "onehot_norm")
    ctx.emit(Op.WHERE, [neg, shifted, ind], [norm])
    classes = ctx.weight(np.arange(depth, dtype=idt).reshape((depth,) + (1,) * (r - 1 - axis)), "classes")
    hit = ctx.temp(want, np.bool_, "onehot_hit")
    ctx.emit(Op.BINARY, [view(ctx, norm, tuple(ins[:axis]) + (1,) + tuple(ins[axis:])), classes], [hit], [BinaryFn.EQUAL])
    off, on = _onehot_values(ctx, values)
    ctx.emit(Op.WHERE, [hit, on, off], [y])


def _onehot_values(ctx: LowerCtx, values: str) -> tuple[str, str]:
    """OneHot's off and on values as scalars: weights when constant, else gathered from the input per run."""
    c = ctx.const(values)
    if c is not None:
        return tuple(ctx.weight(np.asarray(c).reshape(-1)[i:i + 1].reshape(()), "onehot_v") for i in (0, 1))
    off, on = (ctx.temp((1,), ctx.dtype(values), "onehot_v") for _ in range(2))   # (a plan stores scalars as [1])
    for i, t in ((0, off), (1, on)):
        ctx.emit(Op.GATHER, [values, ctx.weight(np.array([i], np.int64), "i")], [t], [0, 0])
    return off, on


def _onehot_run_time_depth(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """OneHot whose depth is a value input (a version-2 plan): the classes are RANGE(0, depth, 1), of a run-time
    length, unsqueezed to the output's rank; indices (as int64, negative ones + depth) equal to a class pick `on`."""
    from .shape_ops import VIEW_UNSQUEEZE
    ind, depth_n, values = node.input[:3]
    y = node.output[0]
    if ctx.shape(depth_n) not in ((), (1,)):
        raise ctx.unsupported(node, f"depth of shape {ctx.shape(depth_n)} is not a scalar")
    ins, ys = ctx.shape(ind), ctx.shape(y)
    r = len(ins) + 1
    axis = _axis(ctx, node, int(ctx.attrs(node).get("axis", -1)), r)
    if len(ys) != r or ctx.shape(values) != (2,) or ctx.dtype(values) != ctx.dtype(y):
        raise ctx.unsupported(node, f"output {ys} / values {ctx.shape(values)} do not fit indices {ins} / (2,)")
    i64 = np.dtype(np.int64)
    depth = depth_n
    if ctx.dtype(depth_n) != i64:   # a float depth is truncated, as the reference does (a resolve-time CAST)
        depth = ctx.temp(ctx.shape(depth_n), i64, "onehot_depth")
        ctx.emit(Op.CAST, [depth_n], [depth])
    if ctx.dtype(ind) != i64:
        t = ctx.temp(ins, i64, "onehot_idx")
        ctx.emit(Op.CAST, [ind], [t])
        ind = t
    d = ys[axis]   # the probe's extent: the classes' length is resolved from the depth's value
    classes = ctx.temp((d,), i64, "onehot_classes")
    ctx.emit(Op.RANGE, [ctx.weight(np.array(0, i64), "zero"), depth, ctx.weight(np.array(1, i64), "one")], [classes])
    after = r - 1 - axis
    shaped = ctx.temp((d,) + (1,) * after, i64, "onehot_classes_nd")
    ctx.emit(Op.VIEW, [classes], [shaped], [VIEW_UNSQUEEZE, 0, after, *range(1, after + 1)])
    neg = ctx.temp(ins, np.bool_, "onehot_neg")
    ctx.emit(Op.BINARY, [ind, ctx.weight(np.zeros((), i64), "zero")], [neg], [BinaryFn.LESS])
    shifted = ctx.temp(ins, i64, "onehot_shift")
    ctx.emit(Op.BINARY, [ind, depth], [shifted], [BinaryFn.ADD])
    norm = ctx.temp(ins, i64, "onehot_norm")
    ctx.emit(Op.WHERE, [neg, shifted, ind], [norm])
    hit = ctx.temp(ys, np.bool_, "onehot_hit")
    ctx.emit(Op.BINARY, [view(ctx, norm, tuple(ins[:axis]) + (1,) + tuple(ins[axis:])), shaped], [hit], [BinaryFn.EQUAL])
    off, on = _onehot_values(ctx, values)
    ctx.emit(Op.WHERE, [hit, on, off], [y])


@lowers("Compress")
def lower_compress(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, cond, y = node.input[0], node.input[1], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, y])
    # The output's extent is the number of true conditions: a plan fixes it only for a constant condition.
    c = np.asarray(ctx.require_const(node, cond)[0]).reshape(-1).astype(bool)
    xs = ctx.shape(x)
    a = ctx.attrs(node)
    if "axis" in a:
        axis = _axis(ctx, node, int(a["axis"]), len(xs))
        src = x
    else:
        axis, src = 0, view(ctx, x, (int(np.prod(xs, dtype=np.int64)),))
    n = ctx.shape(src)[axis]
    if c.size > n:
        raise ctx.unsupported(node, f"condition has {c.size} values for an axis of {n}")
    idx = np.nonzero(c)[0].astype(np.int64)
    want = tuple(len(idx) if i == axis else d for i, d in enumerate(ctx.shape(src)))
    if ctx.shape(y) != want:
        raise ctx.unsupported(node, f"output shape {ctx.shape(y)} differs from the computed {want}")
    ctx.emit(Op.GATHER, [src, ctx.weight(idx, "compress_idx")], [y], [axis, 0])


@lowers("ReverseSequence")
def lower_reverse_sequence(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, lens_n, y = node.input[0], node.input[1], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, y])
    xs = ctx.shape(x)
    if len(xs) < 2 or not ctx.fixed(x):
        raise ctx.unsupported(node, "input rank < 2 or dims known only at run time (the indices are a constant)")
    a = ctx.attrs(node)
    bax, tax = int(a.get("batch_axis", 1)), int(a.get("time_axis", 0))
    if {bax, tax} != {0, 1}:
        raise ctx.unsupported(node, f"batch_axis={bax}, time_axis={tax}: one must be 0, the other 1")
    lens = np.asarray(ctx.require_const(node, lens_n)[0]).reshape(-1).astype(np.int64)
    if lens.size != xs[bax] or np.any(lens < 0) or np.any(lens > xs[tax]):
        raise ctx.unsupported(node, f"sequence_lens {lens.tolist()} do not fit batch {xs[bax]} / time {xs[tax]}")
    t = np.arange(xs[tax]).reshape((-1, 1) if tax == 0 else (1, -1))
    L = lens.reshape((1, -1) if tax == 0 else (-1, 1))
    idx2 = np.where(t < L, L - 1 - t, t)   # [time, batch] or [batch, time]: the first len_b steps reversed
    idx = np.broadcast_to(idx2.reshape(idx2.shape + (1,) * (len(xs) - 2)), xs).astype(np.int32)
    ctx.emit(Op.GATHER, [x, ctx.weight(np.ascontiguousarray(idx), "revseq_idx")], [y], [tax, 1])
