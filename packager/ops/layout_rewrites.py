"""EyeLike, BitCast, CenterCropPad, Col2Im and TensorScatter as existing kernels (no C code of their own).

EyeLike: its output depends on the input's shape only: a package-time constant, COPYed to the output. BitCast:
COPY between two tensors of one byte size (the plan's dtype of the output is the new one; the bytes are kept).
CenterCropPad: SLICE the axes larger than the target, then PAD (zeros) those smaller, each centred as onnx's
reference centres them (the extra element of an odd difference at the end). Col2Im: each column element's place
in the padded image is known at package time, so SCATTER (ScatterElements, reduction add) sums the columns into
a zero padded image [N, C, prod(padded)], and GATHER keeps its interior pixels."""
from __future__ import annotations

import math

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from ..plan.opcodes import DTYPES, Op
from .builder import Builder, const_weight
from .data import DATA_DTYPES, _axis


@lowers("EyeLike")
def lower_eye_like(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    xs = ctx.shape(x)
    if len(xs) != 2 or not ctx.fixed(x):
        raise ctx.unsupported(node, f"input of shape {list(xs)}: a 2-D input with a shape known at package time "
                                    "(give --input-shape)")
    dt = ctx.dtype(y)
    eye = np.eye(xs[0], xs[1], k=int(ctx.attrs(node).get("k", 0)), dtype=dt)
    ctx.emit(Op.COPY, [const_weight(ctx, eye, "eye")], [y])


@lowers("BitCast")
def lower_bitcast(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    to = int(ctx.attrs(node).get("to", 0))
    if to not in DTYPES:
        name = onnx.TensorProto.DataType.Name(to) if to else "unknown"
        raise ctx.unsupported(node, f"to={name} is not a dtype the runtime supports")
    if ctx.dtype(x).itemsize != DTYPES[to].itemsize or ctx.shape(x) != ctx.shape(y):
        raise ctx.unsupported(node, f"{ctx.dtype(x)} -> {DTYPES[to]}: only between dtypes of one size (the "
                                    "shape is kept)")
    ctx.emit(Op.COPY, [x], [y])


@lowers("CenterCropPad")
def lower_center_crop_pad(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, y])
    xs = ctx.shape(x)
    if not ctx.fixed(x):
        raise ctx.unsupported(node, "the input's shape must be known at package time (give --input-shape)")
    target = [int(v) for v in np.asarray(ctx.require_const(node, node.input[1])[0]).reshape(-1)]
    axes = [_axis(ctx, node, int(a), len(xs)) for a in ctx.attrs(node).get("axes", range(len(xs)))]
    if len(axes) != len(target) or len(set(axes)) != len(axes) or min(target, default=0) < 0:
        raise ctx.unsupported(node, f"shape {target} for axes {axes}: one size >= 0 per distinct axis")
    want = list(xs)
    starts, ends, pads = [0] * len(xs), list(xs), [0] * (2 * len(xs))
    for a, t in zip(axes, target):
        want[a] = t
        if t < xs[a]:
            starts[a] = (xs[a] - t) // 2
            ends[a] = starts[a] + t
        elif t > xs[a]:
            pads[a] = (t - xs[a]) // 2
            pads[len(xs) + a] = t - xs[a] - pads[a]
    if tuple(want) != tuple(ctx.shape(y)):
        raise ctx.unsupported(node, f"output shape {list(ctx.shape(y))} differs from the computed {want}")
    b = Builder(ctx, node)
    dt = ctx.dtype(x)
    cropped = x
    if ends != list(xs) or any(starts):
        shape = [e - s for s, e in zip(starts, ends)]
        cropped = b.op("Slice", [x, b.const(starts, np.int64), b.const(ends, np.int64)], shape, dt,
                       out=None if any(pads) else y)
    if any(pads):
        b.op("Pad", [cropped, b.const(pads, np.int64)], want, dt, out=y)
    elif cropped == x:
        ctx.emit(Op.COPY, [x], [y])


def _ints(ctx: LowerCtx, node: onnx.NodeProto, key: str, default: list[int]) -> list[int]:
    return [int(v) for v in ctx.attrs(node).get(key, default)]


@lowers("Col2Im")
def lower_col2im(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, [np.float32], [x, y])
    image, block = (np.asarray(v).reshape(-1).astype(np.int64).tolist()
                    for v in ctx.require_const(node, node.input[1], node.input[2]))
    r = len(image)
    dil, strides = _ints(ctx, node, "dilations", [1] * r), _ints(ctx, node, "strides", [1] * r)
    pads = _ints(ctx, node, "pads", [0] * (2 * r))
    xs = ctx.shape(x)
    if r < 1 or len(block) != r or len(dil) != r or len(strides) != r or len(pads) != 2 * r or len(xs) != 3 or \
            min(image + block + dil + strides) < 1 or min(pads) < 0:
        raise ctx.unsupported(node, f"image_shape {image}, block_shape {block}, dilations {dil}, strides {strides}, "
                                    f"pads {pads}, input of shape {list(xs)}: expected one positive value per "
                                    "spatial dim, pads >= 0 and a 3-D input")
    if not ctx.fixed(x):
        raise ctx.unsupported(node, "the input's shape must be known at package time (give --input-shape)")
    padded = [image[d] + pads[d] + pads[r + d] for d in range(r)]
    count = [(padded[d] - dil[d] * (block[d] - 1) - 1) // strides[d] + 1 for d in range(r)]
    nb, n = math.prod(block), xs[0]
    if min(count) < 1 or xs[1] % nb or xs[2] != math.prod(count):
        raise ctx.unsupported(node, f"input of shape {list(xs)} does not hold C * {nb} rows of {math.prod(count)} "
                                    f"blocks for image_shape {image}, block_shape {block}")
    c = xs[1] // nb
    if tuple(ctx.shape(y)) != (n, c, *image):
        raise ctx.unsupported(node, f"output shape {list(ctx.shape(y))} is not {[n, c, *image]}")
    # each column element's flat index in the padded image: block offset k * dilation + block position l * stride
    k_idx = np.indices(block).reshape(r, -1, 1)
    l_idx = np.indices(count).reshape(r, 1, -1)
    pos = k_idx * np.array(dil).reshape(r, 1, 1) + l_idx * np.array(strides).reshape(r, 1, 1)
    flat = np.ravel_multi_index(tuple(pos), padded).reshape(1, 1, -1)
    k = nb * xs[2]
    b = Builder(ctx, node)
    cols = b.op("Reshape", [x, b.const([n, c, k], np.int64)], (n, c, k))
    summed = b.op("ScatterElements", [b.const(np.zeros((n, c, math.prod(padded)))),
                                      b.const(np.broadcast_to(flat, (n, c, k)), np.int64), cols],
                  (n, c, math.prod(padded)), axis=2, reduction="add")
    inner = np.ravel_multi_index(tuple(np.indices(image).reshape(r, -1) + np.array(pads[:r]).reshape(r, 1)), padded)
    kept = b.op("Gather", [summed, b.const(inner, np.int64)], (n, c, math.prod(image)), axis=2)
    b.op("Reshape", [kept, b.const([n, c, *image], np.int64)], (n, c, *image), out=y)


@lowers("TensorScatter")
def lower_tensor_scatter(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """A KV-cache write: SCATTER (ScatterElements along axis) of the update at rows write_indices[b] + s (modulo
    the cache's length for mode circular); the indices are built in the plan from write_indices (fed at run
    time) and a constant 0..S-1. In mode linear a row past the cache's end is refused at run time."""
    past, upd, y = node.input[0], node.input[1], node.output[0]
    wi = node.input[2] if len(node.input) > 2 else ""
    a = ctx.attrs(node)
    mode = a.get("mode", b"linear")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    ps, us = ctx.shape(past), ctx.shape(upd)
    r = len(ps)
    axis = int(a.get("axis", -2))
    axis = axis + r if axis < 0 else axis
    if mode not in ("linear", "circular") or not 1 <= axis < r or len(us) != r or \
            any(p != u for i, (p, u) in enumerate(zip(ps, us)) if i != axis) or us[axis] > ps[axis]:
        raise ctx.unsupported(node, f"mode={mode!r}, axis={a.get('axis', -2)}, past_cache {list(ps)}, update {list(us)}: "
                                    "mode linear or circular, 1 <= axis < rank, the update the cache's shape but "
                                    "at most as long on axis")
    if not (ctx.fixed(past) and ctx.fixed(upd)):
        raise ctx.unsupported(node, "past_cache's and update's shapes must be known at package time")
    ctx.check_dtypes(node, DATA_DTYPES, [past, upd, y])
    if wi:
        ctx.check_dtypes(node, [np.int64], [wi])
    b = Builder(ctx, node)
    col = [1] * r
    col[0] = ps[0]
    start = b.op("Reshape", [wi, b.const(col, np.int64)], col, np.int64) if wi else b.const(np.zeros(col), np.int64)
    row = [1] * r
    row[axis] = us[axis]
    steps = b.const(np.arange(us[axis]).reshape(row), np.int64)
    at = np.broadcast_shapes(tuple(col), tuple(row))
    idx = b.op("Add", [start, steps], at, np.int64)
    if mode == "circular":
        idx = b.op("Mod", [idx, b.const(ps[axis], np.int64)], at, np.int64)
    idx = b.op("Expand", [idx, b.const(list(us), np.int64)], us, np.int64)
    b.op("ScatterElements", [past, idx, upd], ps, ctx.dtype(past), out=y, axis=axis)
