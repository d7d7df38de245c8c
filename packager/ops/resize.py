"""Resize and Upsample: every output coordinate's source indices and weights are tabulated here, in float64,
following the ONNX reference implementation (onnx/reference/ops/op_resize.py) step by step, so the kernel
(wasm_kernels/src/kernels/resize.c) only gathers and weights. Nearest tables become pure element copies
(any dtype); linear, cubic and antialias tables are weighted (float32)."""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from ..plan.opcodes import Op
from .data import DATA_DTYPES

COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_half_pixel_for_nn", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
MAX_TAPS = 1024        # kernel limit per output coordinate (RS_MAX_TAPS)
MAX_PARAM_WORDS = 1 << 22


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


# -- coefficient functions (as in the ONNX reference) ----------------------------------------------

def _nearest(mode: str) -> Callable[[float, float], np.ndarray]:
    def f(ratio: float, scale: float) -> np.ndarray:
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        if mode == "round_prefer_floor":
            return np.array([ratio <= 0.5, ratio > 0.5], dtype=np.float64)
        if mode == "round_prefer_ceil":
            return np.array([ratio < 0.5, ratio >= 0.5], dtype=np.float64)
        if mode == "floor":
            return np.array([1.0, 0.0])
        return np.array([0.0, 1.0])   # ceil
    return f


def _linear(antialias: bool) -> Callable[[float, float], np.ndarray]:
    def f(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array([1 - ratio, ratio])
        scale = min(scale, 1.0)
        start = int(np.floor(-1 / scale) + 1)
        footprint = 2 - 2 * start
        args = (np.arange(start, start + footprint) - ratio) * scale
        c = np.clip(1 - np.abs(args), 0, 1)
        return c / sum(c)
    return f


def _cubic(A: float, antialias: bool) -> Callable[[float, float], np.ndarray]:
    def f(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array([
                ((A * (ratio + 1) - 5 * A) * (ratio + 1) + 8 * A) * (ratio + 1) - 4 * A,
                ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1,
                ((A + 2) * (1 - ratio) - (A + 3)) * (1 - ratio) * (1 - ratio) + 1,
                ((A * ((1 - ratio) + 1) - 5 * A) * ((1 - ratio) + 1) + 8 * A) * ((1 - ratio) + 1) - 4 * A,
            ])
        scale = min(scale, 1.0)

        def coeff(x: float) -> float:
            x = abs(x)
            if x <= 1:
                return (A + 2) * x ** 3 - (A + 3) * x ** 2 + 1
            if x < 2:
                return A * x ** 3 - 5 * A * x ** 2 + 8 * A * x - 4 * A
            return 0.0
        i_start = int(np.floor(-2 / scale) + 1)
        c = np.array([coeff(scale * (i - ratio)) for i in range(i_start, 2 - i_start)])
        return c / sum(c)
    return f


def axis_table(in_w: int, out_w: int, scale: float, coord: str, get_coeffs, roi: tuple[float, float] | None,
               exclude_outside: bool) -> tuple[np.ndarray, np.ndarray]:
    """(indices [out_w, K] int, -1 = extrapolated; weights [out_w, K] float64) for one axis."""
    output_width = scale * in_w
    y = np.arange(out_w, dtype=np.float64)
    extrap = None
    if coord == "align_corners":
        x = np.zeros(out_w) if output_width == 1 else y * (in_w - 1) / (output_width - 1)
    elif coord == "asymmetric":
        x = y / scale
    elif coord == "tf_crop_and_resize":
        if output_width == 1:
            x = np.full(out_w, (roi[1] - roi[0]) * (in_w - 1) / 2, dtype=np.float64)
        else:
            x = y * (roi[1] - roi[0]) * (in_w - 1) / (output_width - 1)
        x = x + roi[0] * (in_w - 1)
        extrap = (x < 0) | (x > in_w - 1)
    elif coord == "pytorch_half_pixel":
        x = np.full(out_w, -0.5) if output_width == 1 else (y + 0.5) / scale - 0.5
    elif coord == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif coord == "half_pixel_symmetric":
        adjustment = out_w / output_width
        center = in_w / 2
        x = center * (1 - adjustment) + (y + 0.5) / scale - 0.5
    elif coord == "tf_half_pixel_for_nn":
        x = (y + 0.5) / scale
    else:
        raise ValueError(coord)
    xi = np.floor(x).astype(np.int64)
    ratios = np.where(x == xi, 1.0, x - xi)
    coeffs = np.array([get_coeffs(float(r), scale) for r in ratios], dtype=np.float64).reshape(out_w, -1)
    n = coeffs.shape[1]
    pad = int(np.ceil(n / 2))
    xp = x + pad
    pp = np.floor(xp).astype(np.int64)
    frac = xp - pp
    if n % 2 == 0:
        off = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        base = -((n - 1) // 2)
        off = np.where(frac <= 0.5, base, base + 1)
    idx = (pp + off)[:, None] + np.arange(n)[None, :] - pad
    if exclude_outside:
        coeffs = np.where((idx < 0) | (idx >= in_w), 0.0, coeffs)
        s = coeffs.sum(axis=-1, keepdims=True)
        coeffs = coeffs / np.where(s == 0, 1.0, s)
    idx = np.clip(idx, 0, max(in_w - 1, 0))
    if in_w == 0:
        idx[:] = -1
    if extrap is not None:
        idx[extrap] = -1
    return idx.astype(np.int64), coeffs


def emit_resize(ctx: LowerCtx, node: onnx.NodeProto, x: str, y: str, *, mode: str, coord: str, nearest_mode: str,
                scales: Sequence[float] | None, sizes: Sequence[int] | None, axes: Sequence[int] | None,
                roi: Sequence[float] | None, cubic_a: float = -0.75, exclude_outside: bool = False,
                extrapolation: float = 0.0, antialias: bool = False, policy: str = "stretch") -> None:
    shape = list(ctx.shape(x))
    r = len(shape)
    if r == 0:
        raise ctx.unsupported(node, "scalar input")
    axes = list(range(r)) if axes is None else [a + r if a < 0 else a for a in axes]
    if any(not 0 <= a < r for a in axes) or len(set(axes)) != len(axes):
        raise ctx.unsupported(node, f"axes {axes} invalid for rank {r}")
    if roi is not None and len(roi) == 0:
        roi = None
    if coord == "tf_crop_and_resize":
        if roi is None or len(roi) != 2 * len(axes):
            raise ctx.unsupported(node, "tf_crop_and_resize needs an roi of 2 values per axis")
        full = [0.0] * r + [1.0] * r
        for i, a in enumerate(axes):
            full[a], full[r + a] = float(roi[i]), float(roi[len(axes) + i])
        roi = full
    else:
        roi = None
    # Per-axis scale and output size, as the reference computes them.
    if sizes is not None:
        if len(sizes) != len(axes):
            raise ctx.unsupported(node, "sizes and axes differ in length")
        out = list(shape)
        for i, a in enumerate(axes):
            out[a] = int(sizes[i])
        if any(shape[a] == 0 for a in axes):
            raise ctx.unsupported(node, "resizing an empty dimension")
        scale = [out[k] / shape[k] if shape[k] else 1.0 for k in range(r)]
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            s = pick(scale[a] for a in axes)
            scale = [s if k in axes else 1.0 for k in range(r)]
            out = [int(s * shape[k] + 0.5) if k in axes else shape[k] for k in range(r)]
    elif scales is not None:
        if len(scales) != len(axes):
            raise ctx.unsupported(node, "scales and axes differ in length")
        scale = [1.0] * r
        for i, a in enumerate(axes):
            scale[a] = float(scales[i])
        if any(s <= 0 for s in scale):
            raise ctx.unsupported(node, f"non-positive scales {list(scales)}")
        out = [int(s * d) for s, d in zip(scale, shape)]
    else:
        raise ctx.unsupported(node, "neither scales nor sizes given")
    have = tuple(ctx.shape(y))
    if have != tuple(out):
        raise ctx.unsupported(node, f"inferred output shape {have} disagrees with the computed {tuple(out)}")
    if mode == "nearest":
        fn = _nearest(nearest_mode)
    elif mode == "linear":
        fn = _linear(antialias)
    elif mode == "cubic":
        fn = _cubic(cubic_a, antialias)
    else:
        raise ctx.unsupported(node, f"mode '{mode}'")
    tables: list[tuple[np.ndarray, np.ndarray] | None] = []
    for k in range(r):
        identity = math.isclose(scale[k], 1.0) and out[k] == shape[k] and (
            roi is None or (math.isclose(roi[k], 0.0) and math.isclose(roi[r + k], 1.0)))
        if identity or out[k] == 0:
            tables.append(None if identity else (np.zeros((0, 1), np.int64), np.zeros((0, 1))))
            continue
        idx, w = axis_table(shape[k], out[k], scale[k], coord, fn, None if roi is None else (roi[k], roi[r + k]),
                            exclude_outside)
        if idx.shape[1] > MAX_TAPS:
            raise ctx.unsupported(node, f"{idx.shape[1]} taps per output on axis {k} (more than {MAX_TAPS})")
        tables.append((idx, w))
    # Copy mode when every row reads exactly one element with weight 1.
    copy = True
    one: list[np.ndarray | None] = []
    for t in tables:
        if t is None:
            one.append(None)
            continue
        idx, w = t
        ext = (idx < 0).any(axis=1)
        hot = (w == 1.0).sum(axis=1) == 1
        zero = ((w == 0.0) | (w == 1.0)).all(axis=1)
        if not np.all(ext | (hot & zero)):
            copy = False
            break
        pick = np.where(ext, -1, idx[np.arange(len(idx)), np.argmax(w == 1.0, axis=1)] if len(idx) else 0)
        one.append(pick.reshape(-1, 1))
    dt = ctx.dtype(x)
    has_extrap = any(t is not None and (t[0] < 0).any() for t in tables)
    if (not copy or has_extrap) and dt != np.float32:
        raise ctx.unsupported(node, f"mode '{mode}' on dtype {dt} (interpolation needs float32)")
    params: list[int | float] = [0 if copy else 1, float(extrapolation)]
    for k in range(r):
        if tables[k] is None:
            params.append(0)
            continue
        if copy:
            params.append(1)
            params += [int(v) for v in one[k].reshape(-1)]
        else:
            idx, w = tables[k]
            params.append(int(idx.shape[1]))
            params += [int(v) for v in idx.reshape(-1)]
            params += [float(v) for v in w.astype(np.float32).reshape(-1)]
        if len(params) > MAX_PARAM_WORDS:
            raise ctx.unsupported(node, "resize tables too large")
    ctx.emit(Op.RESIZE, [x], [y], params)


@lowers("Resize")
def lower_resize(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, y])
    a = ctx.attrs(node)
    mode = _s(a.get("mode", "nearest"))
    ins = list(node.input) + [""] * (4 - len(node.input))
    if ctx.opset < 11:
        # Resize-10: Upsample semantics (asymmetric; nearest floors when upsampling, ceils when downsampling).
        (sc,) = ctx.require_const(node, ins[1])
        scales = [float(v) for v in sc.reshape(-1)]
        _upsample_like(ctx, node, x, y, mode, scales)
        return
    coord = _s(a.get("coordinate_transformation_mode", "half_pixel"))
    sc, sz = ctx.require_const(node, ins[2], ins[3])
    # roi only matters for tf_crop_and_resize: elsewhere it may stay a run-time input
    roi_c = ctx.require_const(node, ins[1])[0] if coord == "tf_crop_and_resize" else None
    nearest_mode = _s(a.get("nearest_mode", "round_prefer_floor"))
    if coord not in COORD_MODES:
        raise ctx.unsupported(node, f"coordinate_transformation_mode '{coord}'")
    if nearest_mode not in NEAREST_MODES:
        raise ctx.unsupported(node, f"nearest_mode '{nearest_mode}'")
    policy = _s(a.get("keep_aspect_ratio_policy", "stretch"))
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise ctx.unsupported(node, f"keep_aspect_ratio_policy '{policy}'")
    antialias = bool(a.get("antialias", 0))
    if antialias and mode == "nearest":
        raise ctx.unsupported(node, "antialias with mode nearest")
    scales = [float(v) for v in sc.reshape(-1)] if sc is not None and sc.size else None
    sizes = [int(v) for v in sz.reshape(-1)] if sz is not None and sz.size else None
    if scales is not None and sizes is not None:
        raise ctx.unsupported(node, "both scales and sizes given")
    if scales is not None and policy != "stretch":
        policy = "stretch"   # the policy only applies to sizes
    roi = [float(v) for v in roi_c.reshape(-1)] if roi_c is not None else None
    emit_resize(ctx, node, x, y, mode=mode, coord=coord, nearest_mode=nearest_mode, scales=scales, sizes=sizes,
                axes=a.get("axes"), roi=roi, cubic_a=float(a.get("cubic_coeff_a", -0.75)),
                exclude_outside=bool(a.get("exclude_outside", 0)),
                extrapolation=float(a.get("extrapolation_value", 0.0)), antialias=antialias, policy=policy)


def _upsample_like(ctx: LowerCtx, node: onnx.NodeProto, x: str, y: str, mode: str, scales: list[float]) -> None:
    if mode not in ("nearest", "linear", "bilinear"):
        raise ctx.unsupported(node, f"mode '{mode}'")
    if mode == "nearest":
        if any(s < 1 for s in scales) and any(s > 1 for s in scales):
            raise ctx.unsupported(node, "nearest with both up- and down-scaling axes")
        nm = "ceil" if any(s < 1 for s in scales) else "floor"
        emit_resize(ctx, node, x, y, mode="nearest", coord="asymmetric", nearest_mode=nm, scales=scales,
                    sizes=None, axes=None, roi=None)
    else:
        emit_resize(ctx, node, x, y, mode="linear", coord="asymmetric", nearest_mode="floor", scales=scales,
                    sizes=None, axes=None, roi=None)


@lowers("Upsample")
def lower_upsample(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, y])
    a = ctx.attrs(node)
    mode = _s(a.get("mode", "nearest"))
    if len(node.input) > 1 and node.input[1]:
        scales = [float(v) for v in ctx.require_const(node, node.input[1])[0].reshape(-1)]
    elif "scales" in a:
        scales = [float(v) for v in a["scales"]]
    else:
        raise ctx.unsupported(node, "no scales (Upsample-1 width_scale/height_scale form)")
    if any(s < 1 for s in scales):
        raise ctx.unsupported(node, "scales below 1")
    _upsample_like(ctx, node, x, y, mode, scales)
