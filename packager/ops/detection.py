"""RoiAlign as existing kernels (detector heads: Mask R-CNN's box and mask pooling).

Per ROI and per axis, elementwise ops place the sampling points (sampling_ratio per bin, so the shapes are static)
from the box's run-time coordinates, and give each point its two bilinear taps (clamped pixel indices, weights
zeroed for points more than one pixel outside X, as onnx.reference and onnxruntime do). The y and x taps combine
by broadcasting into 4 * s^2 samples per output bin: flat pixel indices into X viewed as [N * H * W, C] (the ROI's
batch index included), one GATHER, weighted, then REDUCE: a sum (avg, weights divided by s^2) or, for max, the
maximum over each point's 4 weighted taps and then over the points (the reference's definition)."""
from __future__ import annotations

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from .builder import Builder


def _axis_taps(b: Builder, rois: str, lo_col: int, r: int, pooled: int, s: int, extent: int, scale: float,
               offset: float, half_pixel: bool) -> tuple[str, str]:
    """Pixel indices (float) and weights [R, pooled * s, 2] of the sampling points along one axis."""
    col = lambda k: b.op("Gather", [rois, b.const([k], np.int64)], (r, 1), axis=1)  # noqa: E731
    start = b.affine(col(lo_col), scale, -offset)
    size = b.bin("Sub", b.affine(col(lo_col + 2), scale, -offset), start)
    if not half_pixel:
        size = b.bin("Max", size, 1.0)
    steps = np.array([[p + (i + 0.5) / s for p in range(pooled) for i in range(s)]], np.float32)   # in bins
    pos = b.bin("Add", start, b.bin("Mul", b.bin("Mul", size, 1.0 / pooled), b.const(steps)))       # [R, pooled * s]
    inside = b.clip(pos, -1.0, float(extent))
    mask = b.op("Cast", [b.op("Equal", [inside, pos], b.ctx.shape(pos), np.bool_)], b.ctx.shape(pos), to=1)
    y = b.clip(pos, 0.0, extent - 1.0)
    low = b.un("Floor", y)
    frac = b.bin("Sub", y, low)
    high = b.clip(b.bin("Add", low, 1.0), 0.0, extent - 1.0)
    shape = (r, pooled * s, 1)
    stack = lambda a, c: b.op("Concat", [b.op("Reshape", [t, b.const(shape, np.int64)], shape) for t in (a, c)],  # noqa: E731
                              (r, pooled * s, 2), axis=2)
    return stack(low, high), stack(b.bin("Mul", b.affine(frac, -1.0, 1.0), mask), b.bin("Mul", frac, mask))


@lowers("RoiAlign")
def lower_roi_align(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    ctx.check_dtypes(node, [np.float32], [node.input[0], node.input[1], node.output[0]])
    ctx.check_dtypes(node, [np.int64, np.int32], [node.input[2]])
    a = ctx.attrs(node)
    text = lambda v: v.decode() if isinstance(v, bytes) else str(v)  # noqa: E731
    mode = text(a.get("mode", "avg"))
    half_pixel = text(a.get("coordinate_transformation_mode", "half_pixel" if ctx.opset >= 16 else
                            "output_half_pixel")) == "half_pixel"
    oh, ow, s = int(a.get("output_height", 1)), int(a.get("output_width", 1)), int(a.get("sampling_ratio", 0))
    scale = float(a.get("spatial_scale", 1.0))
    x, rois, batch, y = node.input[0], node.input[1], node.input[2], node.output[0]
    xs, rs = ctx.shape(x), ctx.shape(rois)
    if mode not in ("avg", "max") or len(xs) != 4 or len(rs) != 2 or rs[1] != 4 or min(oh, ow) < 1:
        raise ctx.unsupported(node, f"mode={mode!r}, X of shape {xs}, rois of shape {rs}, output {oh}x{ow}: expected "
                                    "avg or max, X [N, C, H, W], rois [R, 4], output sizes >= 1")
    if s < 1:
        raise ctx.unsupported(node, f"sampling_ratio={s}: an adaptive count (ceil(roi size / output size)) depends on "
                                    "the boxes' values; give sampling_ratio >= 1")
    if not all(ctx.fixed(t) for t in (x, rois, batch)) or 0 in xs[2:]:
        raise ctx.unsupported(node, "X, rois and batch_indices need shapes known at package time and X a non-empty "
                                    "plane (give --input-shape)")
    n, c, h, w = xs
    r = rs[0]
    b = Builder(ctx, node)
    offset = 0.5 if half_pixel else 0.0
    iy, wy = _axis_taps(b, rois, 1, r, oh, s, h, scale, offset, half_pixel)
    ix, wx = _axis_taps(b, rois, 0, r, ow, s, w, scale, offset, half_pixel)
    grid = (r, oh, s, 2, ow, s, 2)
    as_y = lambda t: b.op("Reshape", [t, b.const([r, oh, s, 2, 1, 1, 1], np.int64)], (r, oh, s, 2, 1, 1, 1))  # noqa: E731
    as_x = lambda t: b.op("Reshape", [t, b.const([r, 1, 1, 1, ow, s, 2], np.int64)], (r, 1, 1, 1, ow, s, 2))  # noqa: E731
    bi = b.op("Cast", [b.op("Reshape", [batch, b.const([r, 1, 1, 1, 1, 1, 1], np.int64)], (r, 1, 1, 1, 1, 1, 1),
                            ctx.dtype(batch))], (r, 1, 1, 1, 1, 1, 1), to=1)
    flat = b.bin("Add", b.bin("Add", b.bin("Mul", bi, float(h * w)), b.bin("Mul", as_y(iy), float(w))), as_x(ix))
    weight = b.bin("Mul", as_y(wy), as_x(wx))
    if mode == "avg":
        weight = b.bin("Mul", weight, 1.0 / (s * s))
    k = oh * s * 2 * ow * s * 2
    ind = b.op("Cast", [b.op("Reshape", [flat, b.const([r, k], np.int64)], (r, k))], (r, k), np.int64,
               to=onnx.TensorProto.INT64)
    pixels = b.op("Transpose", [b.op("Reshape", [x, b.const([n, c, h * w], np.int64)], (n, c, h * w))], (n, h * w, c),
                  perm=[0, 2, 1])
    pixels = b.op("Reshape", [pixels, b.const([n * h * w, c], np.int64)], (n * h * w, c))
    vals = b.op("Gather", [pixels, ind], (r, k, c), axis=0)
    vals = b.bin("Mul", vals, b.op("Reshape", [weight, b.const([r, k, 1], np.int64)], (r, k, 1)))
    vals = b.op("Reshape", [vals, b.const([*grid, c], np.int64)], (*grid, c))
    if mode == "avg":
        pooled = b.reduce("ReduceSum", vals, [2, 3, 5, 6])
    else:
        pooled = b.reduce("ReduceMax", b.reduce("ReduceMax", vals, [3, 6]), [2, 4])
    b.op("Transpose", [pooled], (r, c, oh, ow), out=y, perm=[0, 3, 1, 2])
