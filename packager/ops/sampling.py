"""GridSample as existing kernels (no C code of its own: a kernel did not fit the wasm size budget).

Per spatial dim, elementwise ops turn the grid's coordinate into the sample position (unnormalized; rounded for
nearest; clamped for border, a triangle wave for reflection), then into T taps (1 nearest, 2 linear, 4 cubic):
each tap's pixel index (zeros padding: clamped, its weight masked when outside; border: clamped; reflection:
reflected) and weight (linear: 1 - t, t; cubic: Keys with alpha -0.75). The taps of the r dims combine by
broadcasting into T^r flat indices and weights per output point; GATHER_ND (batch_dims 1) reads those pixels of X
viewed as [N, pixels, C], they are weighted and summed (REDUCE). Semantics of onnxruntime (PyTorch's): cubic with
border padding clamps its taps only, where onnx.reference clamps the coordinate first."""
from __future__ import annotations

import math

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from .builder import Builder

MODES = {"nearest": 1, "linear": 2, "bilinear": 2, "cubic": 4, "bicubic": 4}   # taps per dim; opset 16's names too
PADDINGS = ("zeros", "border", "reflection")
KEYS_A = -0.75


def _reflect(b: Builder, v: str, lo: float, hi: float) -> str:
    """v folded into [lo, hi] by reflections off its borders (identity inside): lo + R - |s - R|, s = (v - lo) mod 2R."""
    span = hi - lo
    if span <= 0:
        return b.affine(v, 0.0, lo)
    rel = b.bin("Sub", v, lo)
    s = b.bin("Sub", rel, b.bin("Mul", b.un("Floor", b.bin("Mul", rel, 1.0 / (2 * span))), 2 * span))
    return b.bin("Sub", b.const(lo + span), b.un("Abs", b.bin("Sub", s, span)))


def _keys(b: Builder, t: str) -> list[str]:
    """Cubic weights of the taps at floor - 1 .. floor + 2 for fractions t: Keys' kernel at distances t + 1, t,
    1 - t, 2 - t."""
    a = KEYS_A
    outer = lambda s: b.bin("Add", b.bin("Mul", b.bin("Add", b.bin("Mul", b.affine(s, a, -5 * a), s), 8 * a), s),  # noqa: E731
                            -4 * a)
    inner = lambda s: b.bin("Add", b.bin("Mul", b.bin("Mul", b.affine(s, a + 2, -(a + 3)), s), s), 1.0)  # noqa: E731
    return [outer(b.affine(t, 1.0, 1.0)), inner(t), inner(b.affine(t, -1.0, 1.0)), outer(b.affine(t, -1.0, 2.0))]


def _dim_taps(b: Builder, u: str, d: int, taps: int, pad: str, align: int) -> tuple[list[str], list[str]]:
    """Pixel indices (float, exact integers inside [0, d)) and weights of each tap along one dim of d pixels."""
    lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
    v = b.affine(u, (d - align) / 2, (d - 1) / 2)
    if taps == 1:
        v = b.un("Round", v)   # halves to even
    if pad == "border" and taps != 4:
        v = b.clip(v, 0.0, d - 1.0)
    elif pad == "reflection":
        v = _reflect(b, v, lo, hi)
    if taps == 1:
        f, weights = v, [None]
    else:
        f = b.un("Floor", v)
        t = b.bin("Sub", v, f)
        weights = [b.affine(t, -1.0, 1.0), t] if taps == 2 else _keys(b, t)
    idx = []
    for k in range(taps):
        p = b.bin("Add", f, float(k - (taps == 4))) if taps > 1 or k else f
        inside = b.clip(p, 0.0, d - 1.0)
        if pad == "zeros":   # outside X: weight 0 (read pixel 0)
            mask = b.op("Cast", [b.op("Equal", [inside, p], b.ctx.shape(p), np.bool_)], b.ctx.shape(p), to=1)
            weights[k] = mask if weights[k] is None else b.bin("Mul", weights[k], mask)
        elif pad == "reflection":
            inside = _reflect(b, p, lo, hi)   # the cast below truncates -0.5 and d - 0.5 onto the edge pixels
        idx.append(inside)
    return idx, weights


@lowers("GridSample")
def lower_grid_sample(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    ctx.check_dtypes(node, [np.float32])
    a = ctx.attrs(node)
    text = lambda v: v.decode() if isinstance(v, bytes) else str(v)  # noqa: E731
    mode, pad = text(a.get("mode", "linear" if ctx.opset >= 20 else "bilinear")), text(a.get("padding_mode", "zeros"))
    align = int(a.get("align_corners", 0))
    if mode not in MODES or pad not in PADDINGS:
        raise ctx.unsupported(node, f"mode={mode!r} padding_mode={pad!r}: modes are {sorted(MODES)}, paddings "
                                    f"{list(PADDINGS)}")
    x, grid, y = node.input[0], node.input[1], node.output[0]
    xs, gs = ctx.shape(x), ctx.shape(grid)
    r = len(xs) - 2
    if not 1 <= r <= 3 or len(gs) != len(xs) or gs[-1] != r or gs[0] != xs[0]:
        raise ctx.unsupported(node, f"X of shape {xs} and grid of shape {gs}: 1 to 3 spatial dims, the grid "
                                    f"[N, out..., {r}]")
    if not (ctx.fixed(x) and ctx.fixed(grid)):
        raise ctx.unsupported(node, "X's and the grid's shapes must be known at package time (give --input-shape)")
    if 0 in xs[2:]:
        raise ctx.unsupported(node, f"X of shape {xs} has an empty spatial dim to sample from")
    n, c, dims = xs[0], xs[1], xs[2:]
    o = math.prod(gs[1:-1])
    taps = MODES[mode]
    b = Builder(ctx, node)
    g = b.op("Reshape", [grid, b.const([n, o, r], np.int64)], (n, o, r))
    flat, weight = None, None
    for i, d in enumerate(dims):   # the grid lists x (the last dim) first
        u = b.op("Gather", [g, b.const([r - 1 - i], np.int64)], (n, o, 1), axis=2)
        idx, ws = _dim_taps(b, u, d, taps, pad, align)
        shape = [n, o] + [1] * r
        shape[2 + i] = taps
        stride = float(math.prod(dims[i + 1:]))
        p = b.op("Reshape", [b.op("Concat", idx, (n, o, taps), axis=2) if taps > 1 else idx[0],
                             b.const(shape, np.int64)], shape)
        p = b.bin("Mul", p, stride) if stride != 1 else p
        flat = p if flat is None else b.bin("Add", flat, p)
        if ws[0] is not None:
            w = b.op("Reshape", [b.op("Concat", ws, (n, o, taps), axis=2) if taps > 1 else ws[0],
                                 b.const(shape, np.int64)], shape)
            weight = w if weight is None else b.bin("Mul", weight, w)
    k = taps ** r
    ind = b.op("Cast", [b.op("Reshape", [flat, b.const([n, o * k, 1], np.int64)], (n, o * k, 1))], (n, o * k, 1),
               np.int64, to=onnx.TensorProto.INT64)
    npix = math.prod(dims)
    x3 = b.op("Reshape", [x, b.const([n, c, npix], np.int64)], (n, c, npix))
    pixels = b.op("Transpose", [x3], (n, npix, c), perm=[0, 2, 1])
    vals = b.op("GatherND", [pixels, ind], (n, o * k, c), batch_dims=1)
    if weight is not None:
        vals = b.bin("Mul", vals, b.op("Reshape", [weight, b.const([n, o * k, 1], np.int64)], (n, o * k, 1)))
    if k > 1:
        vals = b.reduce("ReduceSum", b.op("Reshape", [vals, b.const([n, o, k, c], np.int64)], (n, o, k, c)), [2])
    out = b.op("Transpose", [b.op("Reshape", [vals, b.const([n, o, c], np.int64)], (n, o, c))], (n, c, o), perm=[0, 2, 1])
    b.op("Reshape", [out, b.const(list(ctx.shape(y)), np.int64)], ctx.shape(y), out=y)
