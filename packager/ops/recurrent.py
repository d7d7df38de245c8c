"""RNN, GRU, LSTM (opsets 7-22) and com.microsoft.DynamicQuantizeLSTM -> MATMUL + RECURRENT.

The input projections of every step and direction are one MATMUL, XW = X . W^T + bias, with W^T stored as
constant panels (the GEMM the rest of the runtime uses); RECURRENT (wasm_kernels/src/kernels/recurrent.c) then
runs the steps with R^T stored per direction. Biases: Wb + Rb go into the MATMUL, except GRU's Rbh with
linear_before_reset, which the kernel adds inside r * (H R_h^T + Rbh). Activation alpha/beta are consumed as
onnxruntime does (only by the functions that take them, its defaults otherwise), since bundles are checked
against it. docs/plan-format.md "Recurrent kernel"."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from ..plan.opcodes import Op
from ..plan.opspec import BinaryFn, UnaryFn
from .conv import ACT_NONE, act_params
from .data import PAD_MODES, emit_concat, slice_words, transpose_to
from .data import view
from .linalg import B_PANELS, BIAS_COL, PANEL, a_and_b_bytes, packed_rows_bytes, panels_b

KINDS = {"RNN": 0, "GRU": 1, "LSTM": 2}
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
DIRECTIONS = {"forward": 0, "reverse": 1, "bidirectional": 2}
MIN_OPSET, MAX_OPSET = 7, 22
GEMM_MR = 6   # EP_GEMM_MR (wasm_kernels/src/kernels/gemm.h)

# name (lower case) -> (UNARY code, takes alpha, takes beta, onnxruntime's default alpha, beta)
ACTIVATIONS: dict[str, tuple[UnaryFn, bool, bool, float, float]] = {
    "sigmoid": (UnaryFn.SIGMOID, False, False, 0.0, 0.0),
    "tanh": (UnaryFn.TANH, False, False, 0.0, 0.0),
    "relu": (UnaryFn.RELU, False, False, 0.0, 0.0),
    "hardsigmoid": (UnaryFn.HARDSIGMOID, True, True, 0.2, 0.5),
    "leakyrelu": (UnaryFn.LEAKY_RELU, True, False, 0.01, 0.0),
    "thresholdedrelu": (UnaryFn.THRESHOLDED_RELU, True, False, 0.0, 0.0),
    "scaledtanh": (UnaryFn.TANH, True, True, 0.0, 0.0),
    "affine": (UnaryFn.NONE, True, True, 0.0, 0.0),
    "elu": (UnaryFn.ELU, True, False, 1.0, 0.0),
    "softsign": (UnaryFn.SOFTSIGN, False, False, 0.0, 0.0),
    "softplus": (UnaryFn.SOFTPLUS, False, False, 0.0, 0.0),
}


def scratch_bytes(batch: int, hidden: int, gates: int) -> int:
    """RECURRENT's scratch for a static plan: recurrent.c ep_scratch_RECURRENT's formula (tests/test_shape_fns.py
    checks that the two agree): A packed in 6-row panels, the gate rows, one row of H per batch row."""
    return 4 * (-(-batch // GEMM_MR) * GEMM_MR * hidden + batch * gates * hidden + batch * hidden)


def _activation_words(ctx: LowerCtx, node: onnx.NodeProto, names: list[str], alphas: list[float],
                      betas: list[float]) -> list:
    """6 words per activation: UNARY code, p0, p1, pre, post, shift (y = post * fn(pre * x) + shift)."""
    words: list = []
    ia = ib = 0
    for raw in names:
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        spec = ACTIVATIONS.get(name.lower())
        if spec is None:
            raise ctx.unsupported(node, f"activation '{name}' is not one of {', '.join(sorted(ACTIVATIONS))}")
        code, has_a, has_b, da, db = spec
        a, b = da, db
        if has_a:
            a, ia = (float(alphas[ia]), ia + 1) if ia < len(alphas) else (da, ia)
        if has_b:
            b, ib = (float(betas[ib]), ib + 1) if ib < len(betas) else (db, ib)
        pre, post, shift, p = 1.0, 1.0, 0.0, [0.0, 0.0]
        key = name.lower()
        if key == "scaledtanh":
            pre, post = b, a
        elif key == "affine":
            post, shift = a, b
        elif has_a:
            p = [a, b if has_b else 0.0]
        words += [int(code), *p, pre, post, shift]
    return words


@dataclass
class Weights:
    """One recurrent node's operands in ONNX layout: W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H] or None,
    P [D, 3H] or None. Each a constant, or the name of a tensor fed at run time (packed by kernels in the plan)."""
    w: np.ndarray | str
    r: np.ndarray | str
    b: np.ndarray | str | None
    p: np.ndarray | str | None


Packed = tuple[str, bool, str, "str | None", str, "str | None"]   # W^T, whether in panels, bias, Rbh, R^T, P


def _pack_constant(ctx: LowerCtx, wts: Weights, nd: int, hidden: int, gh: int, lbr: int,
                   segs: list[tuple[int, int]]) -> Packed:
    """Constant operands packed at package time: W^T in 16-column panels; R^T per direction in panels, a segment at
    a time (GRU without linear_before_reset multiplies h's columns separately): [D, panels, H, 16], what
    recurrent.c streams."""
    w, r = np.asarray(wts.w, np.float32), np.asarray(wts.r, np.float32)
    bias = np.zeros((nd, gh), np.float32)
    rbh = None
    if wts.b is not None:
        bb = np.asarray(wts.b, np.float32).reshape(nd, 2 * gh)
        wb, rb = bb[:, :gh], bb[:, gh:]
        bias = wb + rb
        if lbr:   # Rbh stays inside r * (H Rh^T + Rbh)
            bias[:, 2 * hidden:] = wb[:, 2 * hidden:]
            rbh = ctx.weight(np.ascontiguousarray(rb[:, 2 * hidden:]), "rbh")
    if lbr and rbh is None:
        rbh = ctx.weight(np.zeros((nd, hidden), np.float32), "rbh")
    wt = np.ascontiguousarray(w.transpose(2, 0, 1).reshape(w.shape[2], nd * gh))   # [I, D*G*H]
    rt = ctx.weight(np.stack([np.concatenate([panels_b(np.ascontiguousarray(r[d].T[:, a0:a0 + w])) for a0, w in segs])
                              for d in range(nd)]), "rTpanels")
    p = ctx.weight(np.asarray(wts.p, np.float32).reshape(nd, 3 * hidden), "P") if wts.p is not None else None
    return ctx.weight(panels_b(wt), "wpanels"), True, ctx.weight(bias.reshape(-1), "bias"), rbh, rt, p


def _const_or_name(ctx: LowerCtx, v: np.ndarray | str, hint: str) -> str:
    return ctx.weight(np.asarray(v, np.float32), hint) if isinstance(v, np.ndarray) else v


def _slice_last(ctx: LowerCtx, src: str, a0: int, width: int) -> str:
    """src[..., a0:a0 + width] (SLICE), src itself when that is all of it."""
    shape = ctx.shape(src)
    if a0 == 0 and width == shape[-1]:
        return src
    out = ctx.temp((*shape[:-1], width), np.float32, "seg")
    r = len(shape)
    ctx.emit(Op.SLICE, [src], [out], slice_words(r, [a0], [a0 + width], [r - 1], [1]))
    return out


def _pack_at_run_time(ctx: LowerCtx, wts: Weights, nd: int, hidden: int, gh: int, lbr: int,
                      segs: list[tuple[int, int]]) -> Packed:
    """_pack_constant's layouts made by kernels from operands fed at run time: W^T as a plain [I, D*G*H] B
    (TRANSPOSE), the biases by SLICE and BINARY ADD, R^T's panels by TRANSPOSE, SLICE, PAD (to 16 columns)."""
    w, r = _const_or_name(ctx, wts.w, "W"), _const_or_name(ctx, wts.r, "R")
    ins = ctx.shape(w)[2]
    wt = view(ctx, transpose_to(ctx, w, (2, 0, 1)), (ins, nd * gh), "wT")
    rbh = None
    if wts.b is None:
        bias = ctx.weight(np.zeros(nd * gh, np.float32), "bias")
    else:
        bb = view(ctx, _const_or_name(ctx, wts.b, "B"), (nd, 2 * gh), "b2")
        keep = 2 * hidden if lbr else gh   # with linear_before_reset, Rbh stays inside r * (H Rh^T + Rbh)
        summed = ctx.temp((nd, keep), np.float32, "bsum")
        ctx.emit(Op.BINARY, [_slice_last(ctx, bb, 0, keep), _slice_last(ctx, bb, gh, keep)], [summed], [BinaryFn.ADD])
        bias = summed
        if lbr:
            bias = ctx.temp((nd, gh), np.float32, "bias")
            emit_concat(ctx, [summed, _slice_last(ctx, bb, 2 * hidden, hidden)], bias, 1)
            rbh = _slice_last(ctx, bb, gh + 2 * hidden, hidden)
        bias = view(ctx, bias, (nd * gh,), "bias1")
    if lbr and rbh is None:
        rbh = ctx.weight(np.zeros((nd, hidden), np.float32), "rbh")
    rT = transpose_to(ctx, r, (0, 2, 1))   # [D, H, G*H]
    panels = []
    for a0, width in segs:
        seg = _slice_last(ctx, rT, a0, width)
        cols = -(-width // PANEL) * PANEL
        if cols != width:
            padded = ctx.temp((nd, hidden, cols), np.float32, "rpad")
            ctx.emit(Op.PAD, [seg], [padded], [PAD_MODES["constant"], 0, 0, 0, 0, 0, 0, 0, cols - width])
            seg = padded
        panels.append(transpose_to(ctx, view(ctx, seg, (nd, hidden, cols // PANEL, PANEL), "r4"), (0, 2, 1, 3)))
    n_panels = sum(ctx.shape(t)[1] for t in panels)
    rt = panels[0]
    if len(panels) > 1:
        rt = ctx.temp((nd, n_panels, hidden, PANEL), np.float32, "rTpanels")
        emit_concat(ctx, panels, rt, 1)
    p = view(ctx, _const_or_name(ctx, wts.p, "P"), (nd, 3 * hidden), "P2") if wts.p is not None else None
    return wt, False, bias, rbh, rt, p


def emit_recurrent(ctx: LowerCtx, node: onnx.NodeProto, op: str, wts: Weights, x: str, seq_lens: str | None,
                   h0: str | None, c0: str | None, outputs: list[str]) -> None:
    """The MATMUL of the input projections and the RECURRENT node of one RNN / GRU / LSTM."""
    if not MIN_OPSET <= ctx.opset <= MAX_OPSET:
        raise ctx.unsupported(node, f"opset {ctx.opset}: {op} is supported for opsets {MIN_OPSET}-{MAX_OPSET}")
    a = ctx.attrs(node)
    direction = a.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction not in DIRECTIONS:
        raise ctx.unsupported(node, f"direction '{direction}' is not forward, reverse or bidirectional")
    nd = 2 if direction == "bidirectional" else 1
    layout = int(a.get("layout", 0))
    if layout not in (0, 1):
        raise ctx.unsupported(node, f"layout {layout} is not 0 or 1")
    g = GATES[op]
    ws_, rs_ = (np.shape(v) if isinstance(v, np.ndarray) else tuple(ctx.shape(v)) for v in (wts.w, wts.r))
    if len(ws_) != 3 or len(rs_) != 3 or ws_[0] != nd or rs_[0] != nd or ws_[1] % g or rs_[1] != ws_[1]:
        raise ctx.unsupported(node, f"W {list(ws_)} / R {list(rs_)} do not match {nd} direction(s) of {g} gates")
    hidden = ws_[1] // g
    if int(a.get("hidden_size", hidden)) != hidden or rs_[2] != hidden:
        raise ctx.unsupported(node, f"hidden_size {a.get('hidden_size')} does not match W {list(ws_)}, R {list(rs_)}")
    ctx.check_dtypes(node, [np.float32], [x, h0 or "", c0 or "", *outputs])
    ctx.check_dtypes(node, [np.float32], [v for v in (wts.w, wts.r, wts.b, wts.p) if isinstance(v, str)])
    if seq_lens:
        ctx.check_dtypes(node, [np.int32], [seq_lens])
    xs = tuple(ctx.shape(x))
    if len(xs) != 3 or xs[2] != ws_[2]:
        raise ctx.unsupported(node, f"X of shape {list(xs)} does not match W {list(ws_)} (layout {layout})")
    seq, batch = (xs[1], xs[0]) if layout else (xs[0], xs[1])
    clip = a.get("clip")
    if clip is not None and not float(clip) > 0:
        raise ctx.unsupported(node, f"clip {clip} must be positive")
    lbr = int(a.get("linear_before_reset", 0)) if op == "GRU" else 0
    coupled = int(a.get("input_forget", 0)) if op == "LSTM" else 0
    if lbr not in (0, 1) or coupled not in (0, 1):
        raise ctx.unsupported(node, "linear_before_reset / input_forget must be 0 or 1")
    names = list(a.get("activations", DEFAULT_ACTS[op]))
    na = len(DEFAULT_ACTS[op])
    if "activations" not in a:
        names = names * nd
    if len(names) != na * nd:   # ONNX: one list per direction (onnxruntime refuses fewer too)
        raise ctx.unsupported(node, f"{len(names)} activations given, {op} takes {na} per direction ({nd})")
    acts = _activation_words(ctx, node, names, list(a.get("activation_alpha", [])), list(a.get("activation_beta", [])))

    # Input projections: XW = X . W^T + (Wb + Rb) for every step and direction at once.
    gh = g * hidden
    segs = [(0, 2 * hidden), (2 * hidden, hidden)] if op == "GRU" and not lbr else [(0, gh)]
    packed = _pack_constant(ctx, wts, nd, hidden, gh, lbr, segs) if isinstance(wts.w, np.ndarray) and \
        isinstance(wts.r, np.ndarray) and not isinstance(wts.b, str) and not isinstance(wts.p, str) else \
        _pack_at_run_time(ctx, wts, nd, hidden, gh, lbr, segs)
    wt, b_panels, bias, rbh, rt, p = packed
    fold = ctx.fixed(x)   # fixed dims: one [S*B, I] GEMM instead of S products of B rows
    a_in = view(ctx, x, (seq * batch, xs[2]), "x2") if fold else x
    xw_shape = (seq * batch, nd * gh) if fold else (xs[0], xs[1], nd * gh)
    xw = ctx.temp(xw_shape, np.float32, "xw")
    rows = xw_shape[-2]
    ctx.emit(Op.MATMUL, [a_in, wt, bias, None], [xw],
             [BIAS_COL, *act_params((ACT_NONE, ())), *([B_PANELS, nd * gh] if b_panels else [])],
             scratch_bytes=packed_rows_bytes(rows, xs[2]) if b_panels else a_and_b_bytes(rows, xs[2], nd * gh))
    if fold:
        xw = view(ctx, xw, (xs[0], xs[1], nd * gh), "xw3")

    y_shape = (batch, seq, nd, hidden) if layout else (seq, nd, batch, hidden)
    h_shape = (batch, nd, hidden) if layout else (nd, batch, hidden)
    outs = []
    for k in range(3 if op == "LSTM" else 2):
        name = outputs[k] if k < len(outputs) and outputs[k] else None
        want = y_shape if k == 0 else h_shape
        if name is not None and tuple(ctx.shape(name)) != want:
            raise ctx.unsupported(node, f"output '{name}' has shape {list(ctx.shape(name))}, expected {list(want)}")
        outs.append(name or ctx.temp(want, np.float32, "y" if k == 0 else "state"))
    for name in (h0, c0):
        if name and tuple(ctx.shape(name)) != h_shape:
            raise ctx.unsupported(node, f"initial state '{name}' has shape {list(ctx.shape(name))}, expected {list(h_shape)}")
    if seq_lens and tuple(ctx.shape(seq_lens)) != (batch,):
        raise ctx.unsupported(node, f"sequence_lens has shape {list(ctx.shape(seq_lens))}, expected [{batch}]")
    params = [KINDS[op], DIRECTIONS[direction], hidden, layout, float(clip or 0.0), lbr, coupled, *acts]
    ins = [xw, rt, rbh, seq_lens or None, h0 or None, c0 if op == "LSTM" and c0 else None, p]
    while ins and ins[-1] is None:
        ins.pop()
    ctx.emit(Op.RECURRENT, ins, outs, params, scratch_bytes=scratch_bytes(batch, hidden, g))


def _opt(node: onnx.NodeProto, k: int) -> str | None:
    return node.input[k] if len(node.input) > k and node.input[k] else None


def _const_or_input(ctx: LowerCtx, name: str) -> np.ndarray | str:
    c = ctx.const(name)
    return name if c is None else np.asarray(c)


@lowers("RNN", "GRU", "LSTM")
def lower_recurrent(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    op = node.op_type
    w, r = (_const_or_input(ctx, node.input[k]) for k in (1, 2))
    b = _const_or_input(ctx, _opt(node, 3)) if _opt(node, 3) else None
    p = _const_or_input(ctx, _opt(node, 7)) if op == "LSTM" and _opt(node, 7) else None
    emit_recurrent(ctx, node, op, Weights(w, r, b, p), node.input[0], _opt(node, 4), _opt(node, 5),
                   _opt(node, 6) if op == "LSTM" else None, list(node.output))


def _dequantize(q: np.ndarray, scale: np.ndarray, zp: np.ndarray | None) -> np.ndarray:
    """[D, K, N] integers -> floats, with a scale (and zero point) per direction [D] or per column [D, N]."""
    nd = q.shape[0]
    s = np.asarray(scale, np.float32).reshape(nd, 1, -1)
    z = np.asarray(zp, np.float32).reshape(nd, 1, -1) if zp is not None else np.float32(0)
    return ((q.astype(np.float32) - z) * s).astype(np.float32)


@lowers("com.microsoft.DynamicQuantizeLSTM")
def lower_dynamic_quantize_lstm(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """onnxruntime's DynamicQuantizeLSTM (what quantize_dynamic writes for LSTM): W [D, I, 4H] and R [D, H, 4H] are
    8-bit with per-direction or per-column scales and zero points (inputs 8-11). onnxruntime also quantizes X and
    H per step; here the weights are dequantized once at package time and the float LSTM runs, so results differ
    from onnxruntime's by that activation quantization only (tests/test_recurrent.py)."""
    wq, rq, ws, rs = ctx.require_const(node, node.input[1], node.input[2], node.input[8], node.input[10])
    wz = ctx.require_const(node, node.input[9])[0] if _opt(node, 9) else None
    rz = ctx.require_const(node, node.input[11])[0] if _opt(node, 11) else None
    b = ctx.require_const(node, _opt(node, 3))[0] if _opt(node, 3) else None
    p = ctx.require_const(node, _opt(node, 7))[0] if _opt(node, 7) else None
    if wq.ndim != 3 or rq.ndim != 3 or wq.dtype not in (np.int8, np.uint8) or rq.dtype not in (np.int8, np.uint8):
        raise ctx.unsupported(node, "W and R must be 3-D int8/uint8")
    w = _dequantize(wq, ws, wz).transpose(0, 2, 1)   # ONNX LSTM's [D, 4H, I]
    r = _dequantize(rq, rs, rz).transpose(0, 2, 1)
    emit_recurrent(ctx, node, "LSTM", Weights(w, r, b, p), node.input[0], _opt(node, 4), _opt(node, 5), _opt(node, 6),
                   list(node.output))


def rewrite_dynamic_quantize_lstm(b) -> None:
    """The same op for the contrib pass (packager/passes/contrib.py, where the tree has it: it rewrites com.microsoft
    ops into standard ONNX before analysis and refuses the ones it has no rewrite for): a standard LSTM with the
    weights dequantized by _dequantize, as the lowering above does."""
    wq, rq, ws, rs = (b.const_of(b.inp(k)) for k in (1, 2, 8, 10))
    if any(v is None for v in (wq, rq, ws, rs)):
        raise _contrib.Refused("W, R and their scales (inputs 1, 2, 8, 10) must be constants")
    w = _dequantize(wq, ws, b.const_of(b.inp(9))).transpose(0, 2, 1)
    r = _dequantize(rq, rs, b.const_of(b.inp(11))).transpose(0, 2, 1)
    ins = [b.inp(0), b.const(np.ascontiguousarray(w), hint="W"), b.const(np.ascontiguousarray(r), hint="R"),
           *(b.inp(k) for k in range(3, 8))]
    while ins[-1] is None:
        ins.pop()
    outs = [b.out(k) or "" for k in range(3)]
    while outs and not outs[-1]:
        outs.pop()
    b.op("LSTM", ins, outs, **b.attrs)


try:   # register with the contrib pass where it exists (the loader then accepts the op without --allow-domain)
    from ..passes import contrib as _contrib
    _contrib.REWRITES.setdefault("DynamicQuantizeLSTM", rewrite_dynamic_quantize_lstm)
except ImportError:   # no contrib pass in this tree: lower_dynamic_quantize_lstm serves
    _contrib = None
