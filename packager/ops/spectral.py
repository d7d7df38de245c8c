"""Audio front-end ops as lowerings onto existing kernels (no kernel of their own: the wasm size stays put).

DFT: the signal's axis moved next to the real/imaginary dim, the rows [M, n*c] multiplied (MATMUL) by a package-time
constant basis [n*c, n_out*c_out] holding cos/sin (any length, e.g. Whisper's n_fft = 400; zero padding or
truncation to dft_length, onesided, inverse and the one-sided inverse (irfft) are all rows/columns of that matrix).
STFT: a 1-D CONV of the signal with the windowed basis as filters and frame_step as the stride (the framing is the
convolution's own im2col). HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix: constants once their scalar
inputs are (analyze folds them with onnx's reference evaluator); the lowerings below are reached only when an input
is not constant and ask for it (--const). Semantics: onnx.reference.ops.op_dft / op_stft."""
from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper

from ..lowering import LowerCtx, lowers
from .builder import const_weight
from .conv import emit_conv
from .data import transpose_to, view
from .linalg import emit_matmul


def dft_basis(n_in: int, c_in: int, length: int, n_out: int, inverse: bool, irfft: bool,
              window: np.ndarray | None = None) -> np.ndarray:
    """[n_in * c_in, n_out * c_out] such that (signal rows, re/im interleaved) @ basis = the DFT (re/im interleaved;
    c_out = 1 for irfft). Samples past `length` get zero rows (truncation); missing ones add nothing (zero padding).
    `window` scales each input sample (STFT)."""
    w = np.zeros((n_in, c_in, n_out, 1 if irfft else 2), np.float64)
    if irfft:   # y_j = (1/L) sum_k g_k (a_k cos - b_k sin), g = 1 for DC and Nyquist, 2 for the mirrored bins
        k = np.arange(min(n_in, length // 2 + 1))
        j = np.arange(n_out)
        theta = 2 * np.pi * ((k[:, None] * j[None, :]) % length) / length
        g = np.where((k == 0) | ((length % 2 == 0) & (k == length // 2)), 1.0, 2.0)[:, None] / length
        w[k, 0, :, 0] = g * np.cos(theta)
        if c_in == 2:
            w[k, 1, :, 0] = -g * np.sin(theta)
    else:       # y_k = scale * sum_j x_j e^{s i theta}: s = -1 forward, +1 inverse (scale 1/L)
        j = np.arange(min(n_in, length))
        k = np.arange(n_out)
        theta = 2 * np.pi * ((j[:, None] * k[None, :]) % length) / length
        s, scale = (1.0, 1.0 / length) if inverse else (-1.0, 1.0)
        cos, sin = scale * np.cos(theta), scale * np.sin(theta)
        w[j, 0, :, 0], w[j, 0, :, 1] = cos, s * sin
        if c_in == 2:
            w[j, 1, :, 0], w[j, 1, :, 1] = -s * sin, cos
    if window is not None:
        w *= np.asarray(window, np.float64)[:n_in, None, None, None]
    return w.reshape(n_in * c_in, -1)


def _scalar(ctx: LowerCtx, node: onnx.NodeProto, i: int) -> int | None:
    """Optional scalar int input i (a constant, asked for with --const when it is not), None when absent."""
    if len(node.input) <= i or not node.input[i]:
        return None
    (v,) = ctx.require_const(node, node.input[i])
    if np.asarray(v).size != 1:
        raise ctx.unsupported(node, f"input '{node.input[i]}' must be a scalar, not of shape {np.shape(v)}")
    return int(np.asarray(v).reshape(-1)[0])


def _fixed_signal(ctx: LowerCtx, node: onnx.NodeProto) -> tuple[int, ...]:
    ctx.check_dtypes(node, [np.float32], [node.input[0], node.output[0]])
    x = node.input[0]
    xs = ctx.shape(x)
    if not ctx.fixed(x):
        raise ctx.unsupported(node, "the signal's shape must be known at package time (give --input-shape)")
    if len(xs) < 2 or xs[-1] not in (1, 2):
        raise ctx.unsupported(node, f"signal of shape {xs}: the last dim must be 1 (real) or 2 (complex)")
    return xs


def _expect(ctx: LowerCtx, node: onnx.NodeProto, shape: tuple[int, ...]) -> None:
    if tuple(ctx.shape(node.output[0])) != shape:
        raise ctx.unsupported(node, f"output shape {ctx.shape(node.output[0])} differs from the computed {shape}")


@lowers("DFT")
def lower_dft(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    xs = _fixed_signal(ctx, node)
    a = ctx.attrs(node)
    inverse, onesided = bool(a.get("inverse", 0)), bool(a.get("onesided", 0))
    rank = len(xs)
    axis = int(a.get("axis", 1)) if ctx.opset < 20 else _scalar(ctx, node, 2)
    axis = -2 if axis is None else axis
    if not -rank <= axis < rank - 1:
        raise ctx.unsupported(node, f"axis {axis} is not a signal axis of a rank-{rank} input (the last dim is re/im)")
    axis %= rank
    n, c = xs[axis], xs[-1]
    irfft = inverse and onesided
    if onesided and not inverse and c == 2:
        raise ctx.unsupported(node, "onesided=1 needs a real input (last dim 1): a complex signal has no conjugate "
                                    "symmetry")
    length = _scalar(ctx, node, 1)
    length = (2 * (n - 1) if irfft else n) if length is None else length
    if length < 1:
        raise ctx.unsupported(node, f"dft_length {length} must be at least 1")
    n_out = length // 2 + 1 if onesided and not inverse else length
    c_out = 1 if irfft else 2
    # the signal axis moved just before re/im: rows of n*c values
    perm = [d for d in range(rank - 1) if d != axis] + [axis, rank - 1]
    outer = [xs[d] for d in perm[:-2]]
    m = math.prod(outer)
    rows = view(ctx, transpose_to(ctx, node.input[0], perm), (m, n * c))
    basis = const_weight(ctx, dft_basis(n, c, length, n_out, inverse, irfft).astype(np.float32), "dft_basis")
    y_shape = list(xs[:-1]) + [c_out]
    y_shape[axis] = n_out
    _expect(ctx, node, tuple(y_shape))
    prod = ctx.temp((m, n_out * c_out), np.float32, "dft")
    emit_matmul(ctx, helper.make_node("MatMul", [rows, basis], [prod], name=node.name or node.output[0]))
    back = [perm.index(d) for d in range(rank)]   # the axis back in its place (a view when it never moved)
    ctx.alias(node.output[0], transpose_to(ctx, view(ctx, prod, (*outer, n_out, c_out)), back))


@lowers("STFT")
def lower_stft(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    xs = _fixed_signal(ctx, node)
    if len(xs) != 3:
        raise ctx.unsupported(node, f"signal of shape {xs}: STFT takes [batch, signal_length, 1 or 2]")
    batch, s, c = xs
    step = _scalar(ctx, node, 1)
    window = None
    if len(node.input) > 2 and node.input[2]:
        (window,) = ctx.require_const(node, node.input[2])
        window = np.asarray(window, np.float64)
        if window.ndim != 1:
            raise ctx.unsupported(node, f"window of shape {window.shape} must be 1-D")
    length = _scalar(ctx, node, 3)
    if length is None:
        length = s if window is None else window.shape[0]
    if window is not None and window.shape[0] != length:
        raise ctx.unsupported(node, f"window length {window.shape[0]} differs from frame_length {length}")
    if step is None or step < 1 or not 1 <= length <= s:
        raise ctx.unsupported(node, f"frame_step {step} must be >= 1 and frame_length {length} in [1, {s}]")
    onesided = bool(ctx.attrs(node).get("onesided", 1))
    bins = length // 2 + 1 if onesided else length
    frames = 1 + (s - length) // step
    _expect(ctx, node, (batch, frames, bins, 2))
    # filters [2 * bins, c, length]: output channel 2k + re/im
    basis = dft_basis(length, c, length, bins, False, False, window)
    filters = const_weight(ctx, basis.reshape(length, c, 2 * bins).transpose(2, 1, 0).astype(np.float32),
                            "stft_filters")
    xt = transpose_to(ctx, node.input[0], (0, 2, 1))   # [batch, c, s]: a view when c = 1
    conv_out = ctx.temp((batch, 2 * bins, frames), np.float32, "stft")
    emit_conv(ctx, helper.make_node("Conv", [xt, filters], [conv_out], strides=[step],
                                    name=node.name or node.output[0]))
    ctx.alias(node.output[0], transpose_to(ctx, conv_out, (0, 2, 1)))   # [batch, frames, bins * 2]


@lowers("HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix")
def lower_constant_tables(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """Tables of scalar arguments: analyze folds them when those are constants, so only a missing one brings the
    node here (NeedsConstantError asks for it); constants that were not folded exceeded the folding limit."""
    ctx.require_const(node, *node.input)
    raise ctx.unsupported(node, "its output is larger than the folding limit (a constant table too big for a bundle)")
