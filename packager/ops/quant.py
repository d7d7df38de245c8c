"""Quantized ONNX ops -> the int8 kernels (QUANTIZE_LINEAR .. QADD, wasm_kernels/src/kernels/q*.c).

Standalone ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearConv, QLinearMatMul,
ConvInteger, MatMulInteger. The QDQ patterns (DQ -> Conv/Gemm/MatMul [-> act] -> Q, DQ + DQ -> Q) are
matched in packager/passes/qdq_fusion.py and emitted through `emit_qconv` / `emit_qmatmul` / `emit_qadd` here.

Requantization follows ONNX: the integer accumulator (bias included, int32) times
mult = x_scale * w_scale / y_scale in f32, the activation, round half to even, + y_zero_point, saturate.
Weights are stored int8 (uint8 weights minus 128, with the shifted zero point as an int32 input)."""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
import onnx

from ..lowering import LowerCtx, Tensor, lowers
from ..plan.opcodes import CODES, DTYPES, FLOAT8, Op
from ..plan.opspec import BinaryFn, UnaryFn
from . import conv as conv_mod   # THREAD_SLOTS, read when lowering (tests vary it)
from .data import transpose_to, view
from .elementwise import HALF, as_f32
from .linalg import emit_matmul
from .conv import (ACT_CLIP, ACT_LEAKY_RELU, ACT_NONE, ACT_RELU, WINOGRAD_DYNAMIC_MAX_CHANNEL_PAIRS, Activation, conv_geometry,
                   emit_conv, winograd_eligible)

MR, NR = 4, 8                     # EP_QGEMM_MR / EP_QGEMM_NR (qgemm.h)
PANEL_BYTES = 256 * 1024          # int16-pair B block budget (cache resident)
DW_MAX_TAPS = 256                 # QDEPTHWISE_CONV's tap limit (qconv.c)
Q_DTYPES = (np.uint8, np.int8)
# 4/2-bit integers: QUANTIZE_LINEAR / DEQUANTIZE_LINEAR take them as the 8-bit ones (then saturate to their range)
NARROW_Q = tuple(DTYPES[c] for c in (21, 22, 25, 26))
# (u)int16 and blocked quantization: in float32 (BINARY, UNARY ROUND / CLIP, CAST), exact for these ranges
WIDE_Q = (np.dtype(np.int16), np.dtype(np.uint16))
# float8 and float4 quantization: a division or product by the scale (BINARY) and a CAST (its saturate word)
SMALL_FLOAT_Q = tuple(DTYPES[c] for c in (17, 18, 19, 20, 23))


@dataclass
class QParams:
    """A per-tensor quantization: real = (q - zp) * scale."""
    scale: float
    zp: int
    dtype: np.dtype


@dataclass
class QOut:
    """What an integer kernel writes: quantized (q set), float32, or raw int32 accumulators."""
    name: str
    q: QParams | None = None
    raw_i32: bool = False


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def scalar(ctx: LowerCtx, node: onnx.NodeProto, arr: np.ndarray | None, what: str) -> np.ndarray | None:
    if arr is None:
        return None
    a = np.asarray(arr)
    if a.size != 1:
        raise ctx.unsupported(node, f"{what} must be a single value (per-tensor), it has shape {a.shape}")
    return a.reshape(())


def qparams_of(ctx: LowerCtx, node: onnx.NodeProto, scale_name: str, zp_name: str | None,
               dtype: np.dtype) -> QParams:
    """Per-tensor scale / zero point that must be constants."""
    s, z = ctx.require_const(node, scale_name, zp_name or "")
    s = scalar(ctx, node, s, "the scale")
    z = scalar(ctx, node, z, "the zero point")
    if np.asarray(s).dtype != np.float32:
        raise ctx.unsupported(node, f"scale dtype {np.asarray(s).dtype} (only float32 scales are supported)")
    return QParams(float(s), int(z) if z is not None else 0, np.dtype(dtype))


def epilogue_act(activation: Activation, out: QOut) -> list:
    """[code, p0, p1] of the integer epilogue: clip bounds in the output's quantized units."""
    code, ps = activation
    ps = [float(p) for p in ps]
    if code == ACT_CLIP and out.q is not None:
        ps = [ps[0] / out.q.scale, ps[1] / out.q.scale]
    if code not in (ACT_NONE, ACT_RELU, ACT_LEAKY_RELU, ACT_CLIP):
        raise ValueError(f"activation {activation} has no integer epilogue")
    ps = [max(min(p, 3.0e38), -3.0e38) for p in ps]
    return [int(code), *(ps + [0.0] * (2 - len(ps)))]


def weights_i8(w: np.ndarray, wzp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 storage of integer weights and their zero point in the stored domain (uint8 - 128)."""
    w = np.asarray(w)
    if w.dtype == np.uint8:
        return (w.astype(np.int16) - 128).astype(np.int8), np.asarray(wzp, np.int32) - 128
    if w.dtype != np.int8:
        raise ValueError(f"weights of dtype {w.dtype}")
    return w, np.asarray(wzp, np.int32)


def pack_qpanels(w2d: np.ndarray) -> np.ndarray:
    """[M, K] int8 (or int16) -> qgemm.h A panels: ceil(M/MR) panels of Kp pairs x MR rows x 2 (zero padded)."""
    m, k = w2d.shape
    mp, kp = _round_up(max(m, 1), MR), -(-k // 2)
    pad = np.zeros((mp, 2 * kp), w2d.dtype)
    pad[:m, :k] = w2d
    return np.ascontiguousarray(pad.reshape(mp // MR, MR, kp, 2).transpose(0, 2, 1, 3)).reshape(-1)


def per_channel(a: np.ndarray | None, n: int, default: float | int, dtype) -> np.ndarray | None:
    """a as n per-channel values (a single value is repeated); None when it has another size."""
    if a is None:
        return np.full(n, default, dtype)
    a = np.asarray(a).reshape(-1)
    return np.broadcast_to(a, (n,)).astype(dtype) if a.size in (1, n) else None


def bias_i32(bias_f: np.ndarray | None, acc_scale: np.ndarray) -> np.ndarray | None:
    """A float bias in accumulator units (the DQ of an int32 bias at scale x_scale*w_scale gives it back)."""
    if bias_f is None:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.rint(np.asarray(bias_f, np.float64).reshape(-1) / acc_scale.astype(np.float64))
    b = np.nan_to_num(b, nan=0.0, posinf=2**31 - 1, neginf=-2**31)
    return np.clip(b, -2**31, 2**31 - 1).astype(np.int32)


def emit_qconv(ctx: LowerCtx, node: onnx.NodeProto, x: str, xq: QParams, w: np.ndarray, w_scale: np.ndarray | None,
               w_zp: np.ndarray | None, bias: np.ndarray | None, out: QOut, activation: Activation = (ACT_NONE, ()),
               bias_is_int: bool = False) -> None:
    """One integer convolution: x (u8/i8 tensor) * w (integer constant [Cout, Cin/G, kh, kw]).
    bias: float (bias_is_int False: converted to accumulator units) or int32."""
    g = conv_geometry(ctx, node)
    cout = g["cout"]
    wz0, ws = per_channel(w_zp, cout, 0, np.int32), per_channel(w_scale, cout, 1.0, np.float64)
    if wz0 is None or ws is None:
        raise ctx.unsupported(node, "weight scale / zero point must be per tensor or per output channel")
    if np.asarray(w).dtype not in (np.dtype(np.uint8), np.dtype(np.int8)):
        raise ctx.unsupported(node, f"weight dtype {np.asarray(w).dtype} (int8 / uint8 only)")
    wi, wz = weights_i8(w, wz0)
    acc_scale = np.float64(xq.scale) * ws
    b = (np.asarray(bias, np.int32).reshape(-1) if bias_is_int else bias_i32(bias, acc_scale)) if bias is not None else None
    if out.raw_i32:
        mult = None
    else:
        mult = (acc_scale / (out.q.scale if out.q else 1.0)).astype(np.float32)
    zps = [xq.zp, out.q.zp if out.q else 0]
    act = epilogue_act(activation, out)
    window = [g["kh"], g["kw"], g["sh"], g["sw"], g["dh"], g["dw"], g["pt"], g["pl"], g["pb"], g["pr"]]
    wino = QWINOGRAD and qwinograd_eligible(g, wi, wz)
    ins = [x, None, ctx.weight(b, "qb") if b is not None else None,
           ctx.weight(mult, "qm") if mult is not None else None,
           ctx.weight(wz, "wzp") if np.any(wz) and not wino else None]   # Winograd: the zero points are in U
    while len(ins) > 2 and ins[-1] is None:   # ins[1], the weights, is set below
        ins.pop()
    if wino:
        ins[1] = ctx.weight(qwinograd_filters(wi, wz), "qwino")
        nt, scratch = qwinograd_tiles(g)
        nt = 0 if ctx.dynamic else nt   # a dynamic plan's blocks are sized by the core (qwinograd.c)
        ctx.emit(Op.QWINOGRAD_CONV, ins, [out.name], window + [nt, *zps, *act, cout], scratch_bytes=scratch)
        return
    if g["group"] == g["cin"] == cout and g["kh"] * g["kw"] <= DW_MAX_TAPS:
        wp = g["w"] + g["pl"] + g["pr"]
        pw = max(-(-wp // g["sw"]), _round_up(g["ow"], 8) + (g["kw"] - 1) * g["dw"] // g["sw"])
        # the int16 plane, one per thread slot (qconv.c: a node runs on as many threads as its scratch holds planes)
        scratch = (g["h"] + g["pt"] + g["pb"]) * g["sw"] * _round_up(pw, 8) * 2 * conv_mod.THREAD_SLOTS
        ins[1] = ctx.weight(wi.reshape(cout, -1), "qdw")
        ctx.emit(Op.QDEPTHWISE_CONV, ins, [out.name], window + zps + act, scratch_bytes=scratch)
        return
    G = g["group"]
    mg, kg = cout // G, g["cin"] // G * g["kh"] * g["kw"]
    w3 = wi.reshape(G, mg, kg)
    ins[1] = ctx.weight(np.concatenate([pack_qpanels(w3[i]) for i in range(G)]), "qwpk")
    kp = -(-kg // 2)
    n = g["oh"] * g["ow"]
    nt = min(_round_up(n, NR), max(NR, PANEL_BYTES // (kp * 4) // NR * NR))   # qconv.c qconv_nt
    scratch = kp * nt * 4 + nt * 4 + (nt * 4 if len(ins) > 4 and ins[4] else 0)   # panel, 2 tap rows, column sums
    nt = 0 if ctx.dynamic else nt   # a dynamic plan's block width is derived by the core (qconv_nt)
    ctx.emit(Op.QCONV, ins, [out.name], [G, *window, nt, *zps, *act, cout], scratch_bytes=scratch)


# Exact integer Winograd F(2x2, 3x3) for QCONV's 3x3 stride-1 case (qwinograd.c): U = (2G) g (2G)^T in integers.
QWINOGRAD = True                  # False packages those convs as QCONV (tests compare the two)
# U (int16, 16 per 9 taps) is 3.6x the bytes of QCONV's int8 weights. Winograd saves multiplies in proportion to
# Cin*Cout*OH*OW and adds bytes in proportion to Cin*Cout: layers with big weights for a small output plane
# stay QCONV (resnet18's 512-channel 7x7 convs: 5350 weights per output pixel; its 256-channel 14x14 ones: 334),
# which keeps an int8 bundle within 0.3x of the float32 one (tests/test_int8.py).
QWINOGRAD_MAX_CHANNEL_PAIRS_PER_PIXEL = 400
WINOGRAD_2G = np.array([[2, 0, 0], [1, 1, 1], [1, -1, 1], [0, 0, 2]], np.int64)


def qwinograd_eligible(g: dict, wi: np.ndarray, wz: np.ndarray) -> bool:
    """Where the float path picks Winograd, the weights are not too big for the plane (above), and 4x the direct
    sum's bound (|x - x_zp| <= 255) fits int32: the kernel's Y = A^T M A is 4x QCONV's accumulator, divided back
    exactly only if it did not wrap."""
    if not winograd_eligible(g) or g["cin"] * 9 > 65536:
        return False
    plane = g["oh"] * g["ow"] if g.get("plane_fixed", True) else None   # (None: it varies from run to run)
    if plane is not None and g["cin"] * g["cout"] > QWINOGRAD_MAX_CHANNEL_PAIRS_PER_PIXEL * plane:
        return False
    if plane is None and g["cin"] * g["cout"] > WINOGRAD_DYNAMIC_MAX_CHANNEL_PAIRS:
        return False
    wmax = int(np.abs(wi.astype(np.int64) - wz.reshape(-1, 1, 1, 1)).max(initial=0))
    return 4 * 9 * g["cin"] * 255 * wmax < 2**31


def qwinograd_filters(wi: np.ndarray, wz: np.ndarray) -> np.ndarray:
    """[Cout, Cin, 3, 3] stored weights minus their zero points -> the 16 U_k = ((2G) g (2G)^T)[i, j] (k = 4i + j),
    each [Cout x Cin] as int16 A panels; two int16 per int32 word (the pair's first depth in the low half)."""
    wc = wi.astype(np.int64) - wz.reshape(-1, 1, 1, 1)
    u = np.einsum("ia,ocab,jb->ijoc", WINOGRAD_2G, wc, WINOGRAD_2G)
    assert np.abs(u).max(initial=0) < 2**15
    packed = np.concatenate([pack_qpanels(u[i, j].astype(np.int16)) for i in range(4) for j in range(4)])
    return packed.astype("<i2").view("<i4")


def qwinograd_tiles(g: dict) -> tuple[int, int]:
    """(tiles per block, scratch bytes): mirror of qwinograd.c (qwg_geometry, ep_scratch_QWINOGRAD_CONV). The 16 V_k
    planes of a block (int16 pairs, 64 bytes per channel and tile) are re-read for every 4-channel panel: they get
    PANEL_BYTES, balanced blocks."""
    th, tw = -(-g["oh"] // 2), -(-g["ow"] // 2)
    tiles, kp = th * tw, -(-g["cin"] // 2)
    nt = max(NR, PANEL_BYTES // (16 * kp * 4) // NR * NR)
    blocks = -(-tiles // nt)
    nt = min(tiles, _round_up(-(-tiles // blocks), NR))
    ldb, rw = _round_up(nt, NR), _round_up(2 * tw + 16, 8)
    return nt, 16 * kp * ldb * 4 + (16 * MR * ldb + 8) * 4 + 8 * rw * 2


def emit_qmatmul(ctx: LowerCtx, node: onnx.NodeProto, x: str, xq: QParams, w: str | np.ndarray, w_scale: np.ndarray | None,
                 w_zp: np.ndarray | None, bias: np.ndarray | None, out: QOut, activation: Activation = (ACT_NONE, ()),
                 x_zp_tensor: str | None = None) -> None:
    """Y = X W (numpy matmul) with X u8/i8 [..., M, K] and W u8/i8: an integer constant [K, N] (numpy array)
    or a runtime tensor name [..., K, N]. Scales / zero points of W per column (N) or per tensor."""
    xs, ys = ctx.shape(x), ctx.shape(out.name)
    if isinstance(w, np.ndarray):
        if w.ndim != 2:
            raise ctx.unsupported(node, f"constant integer weights of rank {w.ndim} (only 2-D)")
        wdt = w.dtype
        ws_shape = w.shape
    else:
        wdt = ctx.dtype(w)
        ws_shape = ctx.shape(w)
    if wdt not in (np.dtype(np.uint8), np.dtype(np.int8)):
        raise ctx.unsupported(node, f"weight dtype {wdt}")
    if len(xs) < 2 or len(ws_shape) < 2:
        raise ctx.unsupported(node, "1-D integer MatMul operands")
    K, N = ws_shape[-2], ws_shape[-1]
    M = xs[-2]
    if xs[-1] != K:
        raise ctx.unsupported(node, f"inner dimensions differ ({xs[-1]} vs {K})")
    wzp = per_channel(w_zp, N, 0, np.int32)
    ws = per_channel(w_scale, N, 1.0, np.float64)
    if wzp is None or ws is None:
        raise ctx.unsupported(node, "weight scale / zero point must be per tensor or per output column")
    acc_scale = np.float64(xq.scale) * ws
    b = bias_i32(bias, acc_scale)
    mult = None if out.raw_i32 else (acc_scale / (out.q.scale if out.q else 1.0)).astype(np.float32)
    rows = int(np.prod(xs[:-1], dtype=np.int64))
    fixed = all(ctx.fixed(x, a) for a in range(len(xs) - 1))
    if isinstance(w, np.ndarray) and fixed and x_zp_tensor is None and (rows == 1 or rows >= NR):
        # X W = (W^T X^T)^T: a 1x1 QCONV on W^T packed at package time (QMATMUL packs all of W at every run) over
        # X^T as a [1, K, 1, rows] image, between two 8-bit transposes (none for one row: X [1, K] is NCHW already).
        wi, wz = weights_i8(np.ascontiguousarray(w.T), wzp)
        code = CODES[np.dtype(np.int32)] if out.raw_i32 else CODES[np.dtype(out.q.dtype)] if out.q else CODES[np.dtype(np.float32)]
        xt = transpose_to(ctx, view(ctx, x, (rows, K)), (1, 0))
        y4 = ctx._fresh("qfc")
        ctx.tensors[y4] = Tensor(y4, code, (1, N, 1, rows))
        ins = [view(ctx, xt, (1, K, 1, rows)), ctx.weight(pack_qpanels(wi), "qwpk"), ctx.weight(b, "qb") if b is not None else None,
               ctx.weight(mult, "qm") if mult is not None else None, ctx.weight(wz, "wzp") if np.any(wz) else None]
        while ins and ins[-1] is None:
            ins.pop()
        kp = -(-K // 2)
        nt = min(_round_up(rows, NR), max(NR, PANEL_BYTES // (kp * 4) // NR * NR))   # qconv.c qconv_nt
        ctx.emit(Op.QCONV, ins, [y4], [1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, nt, xq.zp, out.q.zp if out.q else 0,
                                       *epilogue_act(activation, out), N],
                 scratch_bytes=kp * nt * 4 + nt * 4 + (nt * 4 if len(ins) > 4 else 0))
        yr = transpose_to(ctx, view(ctx, y4, (N, rows)), (1, 0))
        ctx.tensors[out.name] = Tensor(out.name, code, tuple(ys), alias=yr)
        return
    # Batch: Y's batch dims equal X's; W's all 1 (a 2-D weight folds X's batch into M) or equal.
    if len(ws_shape) == 2:
        bx = int(np.prod(xs[:-2], dtype=np.int64))
        xv = view(ctx, x, (bx * M, K))
        wv = ctx.weight(w, "qw") if isinstance(w, np.ndarray) else w
        yshape = (bx * M, N)
    else:
        batch = tuple(int(d) for d in np.broadcast_shapes(tuple(xs[:-2]), tuple(ws_shape[:-2])))
        if tuple(xs[:-2]) != batch or not (all(d == 1 for d in ws_shape[:-2]) or tuple(ws_shape[:-2]) == batch):
            raise ctx.unsupported(node, "integer MatMul batch broadcasting of the left operand")
        xv = x
        wv = view(ctx, w, (1,) * (len(xs) - len(ws_shape)) + tuple(ws_shape))   # same rank as X
        yshape = tuple(ys)
    y = out.name if tuple(yshape) == tuple(ys) else None
    if y is None:
        code = CODES[np.dtype(np.int32)] if out.raw_i32 else CODES[np.dtype(out.q.dtype)] if out.q else CODES[np.dtype(np.float32)]
        y = ctx._fresh("qmm")
        ctx.tensors[y] = Tensor(y, code, tuple(yshape))
    ins = [xv, wv, ctx.weight(b, "qb") if b is not None else None, ctx.weight(mult, "qm") if mult is not None else None,
           ctx.weight(wzp, "wzp") if np.any(wzp) else None, x_zp_tensor]
    while ins and ins[-1] is None:
        ins.pop()
    kp = -(-K // 2)
    nb = min(_round_up(N, NR), max(NR, PANEL_BYTES // (kp * 4) // NR * NR))   # qmatmul.c qmm_nb
    a_bytes = _round_up(_round_up(ctx.shape(xv)[-2], MR) * kp * 2, 16)
    scratch = a_bytes + kp * nb * 4 + nb * 4   # qmatmul.c ep_scratch_QMATMUL
    nb = 0 if ctx.dynamic else nb   # a dynamic plan's block width is derived by the core (qmm_nb)
    ctx.emit(Op.QMATMUL, ins, [y], [xq.zp, out.q.zp if out.q else 0, *epilogue_act(activation, out), nb],
             scratch_bytes=scratch)
    if y != out.name:
        ctx.tensors[out.name] = Tensor(out.name, ctx.tensors[y].dtype, tuple(ys), alias=y)


def emit_qadd(ctx: LowerCtx, a: str, aq: QParams, b: str, bq: QParams, out: QOut,
              activation: Activation = (ACT_NONE, ())) -> None:
    ctx.emit(Op.QADD, [a, b], [out.name], [aq.zp, bq.zp, out.q.zp, float(np.float32(aq.scale)), float(np.float32(bq.scale)),
                                            float(np.float32(out.q.scale)), *epilogue_act(activation, out)])


def emit_qmaxpool(ctx: LowerCtx, node: onnx.NodeProto, x: str, out: str) -> None:
    """MaxPool of 8-bit values (2-D): the float lowering's geometry (auto_pad, ceil_mode resolved)."""
    from .pool import pool_geometry
    a = ctx.attrs(node)
    xs, ys = ctx.shape(x), ctx.shape(out)
    kernel = [int(k) for k in a.get("kernel_shape", [])]
    if len(kernel) != 2:
        raise ctx.unsupported(node, "int8 MaxPool: only 2-D windows")
    strides = [int(v) for v in a.get("strides", [1, 1])]
    dil = [int(v) for v in a.get("dilations", [1, 1])]
    pads = [int(v) for v in a.get("pads", [0, 0, 0, 0])]
    ap = a.get("auto_pad", b"NOTSET")
    ap = ap.decode() if isinstance(ap, bytes) else str(ap)
    ceil_mode = int(a.get("ceil_mode", 0))
    if ap.startswith("SAME") and not all(ctx.fixed(x, k) for k in (2, 3)):
        raise ctx.unsupported(node, "int8 MaxPool: auto_pad SAME_* on spatial dims known only at run time")
    outs, pb, pe = pool_geometry(ctx, node, list(xs[2:]), kernel, strides, dil, pads, ap, ceil_mode)
    if tuple(ys) != (xs[0], xs[1], *outs):
        raise ctx.unsupported(node, f"output shape {ys} differs from the computed {(xs[0], xs[1], *outs)}")
    # The 11-word form: end pads and ceil_mode, from which the kernel's shape function derives OH, OW.
    ctx.emit(Op.QMAXPOOL, [x], [out], [*kernel, *strides, *dil, pb[0], pb[1], pe[0], pe[1], ceil_mode])


def emit_qlut(ctx: LowerCtx, x: str, table: np.ndarray, out: str) -> None:
    """y = table[x as an unsigned byte]: a QDQ region elementwise in one 8-bit tensor (packager/passes/qdq_lut.py)."""
    ctx.emit(Op.QLUT, [x, ctx.weight(np.ascontiguousarray(table).reshape(256), "qlut")], [out], [])


# ------------------------------------------------------------------------------------ standalone ops

def _axis_params(ctx: LowerCtx, node: onnx.NodeProto, x: str, scale_shape: tuple[int, ...]) -> list[int]:
    a = ctx.attrs(node)
    if int(a.get("block_size", 0)):
        return [_blocked_axis(ctx, node, x, scale_shape)]
    rank = len(ctx.shape(x))
    axis = int(a.get("axis", 1))
    axis = axis + rank if axis < 0 else axis
    size = int(np.prod(scale_shape, dtype=np.int64))
    if size != 1:
        if len(scale_shape) != 1 or not 0 <= axis < rank or ctx.shape(x)[axis] != size:
            raise ctx.unsupported(node, f"scale of shape {tuple(scale_shape)} does not match axis {axis}")
    return [axis if size != 1 else 0]


def _blocked_axis(ctx: LowerCtx, node: onnx.NodeProto, x: str, scale_shape: tuple[int, ...]) -> int:
    """Blocked quantization's axis, once the scale's shape is X's with dims[axis] / block_size blocks."""
    a = ctx.attrs(node)
    xs, bs = ctx.shape(x), int(a["block_size"])
    axis = int(a.get("axis", 1))
    axis = axis + len(xs) if axis < 0 else axis
    if not 0 <= axis < len(xs) or bs <= 0 or xs[axis] % bs or tuple(scale_shape) != (*xs[:axis], xs[axis] // bs, *xs[axis + 1:]):
        raise ctx.unsupported(node, f"block_size={bs} on axis {axis}: the scale's shape {tuple(scale_shape)} must be "
                                    f"X's {tuple(xs)} with that axis divided into whole blocks")
    return axis


def _qparam_inputs(ctx: LowerCtx, node: onnx.NodeProto, x: str, zp_dtype: np.dtype, hint: str) -> tuple[list[str], list[int]]:
    """(the kernel's [X, scale, zero_point?] inputs, its params) for Q/DQ. A constant scale / zero point is stored
    as a weight (the zero point cast to zp_dtype); one fed at run time is read by the kernel as it comes, so it
    must already have the kernel's dtype (a float16 / bfloat16 scale is widened to float32 by a CAST, exactly)."""
    scale, zp = node.input[1], _opt(node, 2)
    ins = [x]
    keep_shape = bool(int(ctx.attrs(node).get("block_size", 0)))   # blocked: the views need the scale's dims
    for name, dt, what in ((scale, np.dtype(np.float32), "qs"), (zp, zp_dtype, "qz")):
        if not name:
            continue
        v = ctx.const(name)
        if v is None:
            if what == "qs" and ctx.dtype(name) in HALF:
                name = as_f32(ctx, node, name)
            elif ctx.dtype(name) != dt:
                raise ctx.unsupported(node, f"'{name}' fed at run time has dtype {ctx.dtype(name)}, not {dt}")
            ins.append(name)
        else:
            v = np.asarray(v)
            if what == "qs" and v.dtype not in (np.float32, *HALF):
                raise ctx.unsupported(node, f"scale dtype {v.dtype} (only float32, float16, bfloat16)")
            ins.append(ctx.weight(v.astype(dt) if keep_shape else v.astype(dt).reshape(-1), hint + what[1]))
    return ins, _axis_params(ctx, node, x, tuple(ctx.shape(scale)))


@lowers("QuantizeLinear")
def lower_quantize(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x = node.input[0]
    ctx.check_dtypes(node, [np.float32, *HALF], [x])
    out_dt = ctx.dtype(node.output[0]) if node.output[0] in ctx.graph.dtypes else None
    if out_dt not in (*Q_DTYPES, *NARROW_Q, *WIDE_Q, *SMALL_FLOAT_Q):
        supported = ', '.join(np.dtype(d).name for d in (*Q_DTYPES, *NARROW_Q, *WIDE_Q, *SMALL_FLOAT_Q))
        raise ctx.unsupported(node, f"output dtype {out_dt} (supported: {supported})")
    ins, params = _qparam_inputs(ctx, node, as_f32(ctx, node, x), out_dt, "q")
    if out_dt in SMALL_FLOAT_Q:
        _quantize_small_float(ctx, node, ins, params[0], out_dt)
    elif out_dt in WIDE_Q or int(ctx.attrs(node).get("block_size", 0)):
        _quantize_via_f32(ctx, node, ins, params[0], out_dt)
    else:
        ctx.emit(Op.QUANTIZE_LINEAR, ins, [node.output[0]], params)


def _blocked_views(ctx: LowerCtx, node: onnx.NodeProto, ins: list[str], axis: int) -> tuple[str, list[str], tuple[int, ...]]:
    """X and its scale / zero point as views that broadcast: per axis [C, 1, ..., 1]; blocked, X split along the axis
    into [blocks, block_size] and the scale [blocks, 1]. Returns (X view, [scale, zp] views, X's shape)."""
    x, xs = ins[0], ctx.shape(ins[0])
    bs = int(ctx.attrs(node).get("block_size", 0))
    if not bs:
        return x, [_scale_view(ctx, q, x, axis) for q in ins[1:]], xs
    split = (*xs[:axis], xs[axis] // bs, bs, *xs[axis + 1:])
    return view(ctx, x, split), [view(ctx, q, (*xs[:axis], xs[axis] // bs, 1, *xs[axis + 1:])) for q in ins[1:]], split


def _quantize_via_f32(ctx: LowerCtx, node: onnx.NodeProto, ins: list[str], axis: int, out_dt: np.dtype) -> None:
    """Integer quantization the kernel lacks ((u)int16, blocked scales) in float32: x / scale, round half to even,
    + zero point, clamp to the dtype's range, CAST (exact: integers below 2^24 after the clamp)."""
    xv, (sv, *zv), shape = _blocked_views(ctx, node, ins, axis)
    t = ctx.temp(shape, np.float32, "q_div")
    ctx.emit(Op.BINARY, [xv, sv], [t], [BinaryFn.DIV])
    r = ctx.temp(shape, np.float32, "q_round")
    ctx.emit(Op.UNARY, [t], [r], [UnaryFn.ROUND])
    if zv:
        t = ctx.temp(shape, np.float32, "q_add")
        ctx.emit(Op.BINARY, [r, _f32(ctx, zv[0], "q_zp")], [t], [BinaryFn.ADD])
        r = t
    info = ml_dtypes.iinfo(out_dt)
    c = ctx.temp(shape, np.float32, "q_clip")
    ctx.emit(Op.UNARY, [r], [c], [UnaryFn.CLIP, float(info.min), float(info.max)])
    ctx.emit(Op.CAST, [view(ctx, c, ctx.shape(node.output[0]))], [node.output[0]])


def _f32(ctx: LowerCtx, name: str, hint: str) -> str:
    """name CAST to a float32 temporary (a zero point or an integer operand computed in float32)."""
    out = ctx.temp(ctx.shape(name), np.float32, hint)
    ctx.emit(Op.CAST, [name], [out])
    return out


def _scale_view(ctx: LowerCtx, name: str, x: str, axis: int) -> str:
    """A per-axis scale (or zero point) as a view broadcasting along X's axis: [C, 1, ..., 1]."""
    n = int(np.prod(ctx.shape(name), dtype=np.int64))
    return view(ctx, name, (n,) + (1,) * (len(ctx.shape(x)) - 1 - axis) if n != 1 else ())


def _quantize_small_float(ctx: LowerCtx, node: onnx.NodeProto, ins: list[str], axis: int, out_dt: np.dtype) -> None:
    """y = x / scale (+ zero point for float4; a float8 one must be 0 and is not read, as onnx's reference) rounded
    to the format by CAST, saturating as the node's `saturate` says (float4 always saturates)."""
    saturate = int(ctx.attrs(node).get("saturate", 1))
    if saturate not in (0, 1):
        raise ctx.unsupported(node, f"saturate={saturate} must be 0 or 1")
    x, y = ins[0], node.output[0]
    t = ctx.temp(ctx.shape(x), np.float32, "q_div")
    ctx.emit(Op.BINARY, [x, _scale_view(ctx, ins[1], x, axis)], [t], [BinaryFn.DIV])
    if len(ins) > 2 and out_dt == DTYPES[23]:
        t2 = ctx.temp(ctx.shape(x), np.float32, "q_add")
        ctx.emit(Op.BINARY, [t, _scale_view(ctx, _f32(ctx, ins[2], "q_zp"), x, axis)], [t2], [BinaryFn.ADD])
        t = t2
    ctx.emit(Op.CAST, [t], [y], [saturate, 0] if CODES[out_dt] in FLOAT8 else [])


@lowers("DequantizeLinear")
def lower_dequantize(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, [np.uint8, np.int8, np.int32, *NARROW_Q, *WIDE_Q, *SMALL_FLOAT_Q], [x])
    ctx.check_dtypes(node, [np.float32, *HALF], [y])
    ins, params = _qparam_inputs(ctx, node, x, ctx.dtype(x), "dq")
    y32 = y if ctx.dtype(y) == np.float32 else ctx.temp(ctx.shape(y), np.float32, "f32_out")
    if ctx.dtype(x) in (*WIDE_Q, *SMALL_FLOAT_Q) or int(ctx.attrs(node).get("block_size", 0)):
        # in float32: y = (f32(x) - f32(zp)) * scale; a float8 / float4 zero point is not read (as the reference)
        t = _f32(ctx, x, "dq_f32")
        if ctx.dtype(x) in SMALL_FLOAT_Q:
            ins = ins[:2]
        xv, (sv, *zv), shape = _blocked_views(ctx, node, [t, *ins[1:]], params[0])
        if zv:
            d = ctx.temp(shape, np.float32, "dq_sub")
            ctx.emit(Op.BINARY, [xv, _f32(ctx, zv[0], "dq_zp")], [d], [BinaryFn.SUB])
            xv = d
        ctx.emit(Op.BINARY, [xv, sv], [view(ctx, y32, shape)], [BinaryFn.MUL])
    else:
        ctx.emit(Op.DEQUANTIZE_LINEAR, ins, [y32], params)
    if y32 != y:   # a float16 / bfloat16 output: rounded once from float32
        ctx.emit(Op.CAST, [y32], [y])


@lowers("DynamicQuantizeLinear")
def lower_dynamic_quantize(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    ctx.check_dtypes(node, [np.float32], [node.input[0]])
    outs = list(node.output) + [""] * (3 - len(node.output))
    names = [o or ctx.temp(shape, dt, "dq") for o, shape, dt in
             zip(outs, [ctx.shape(node.input[0]), (), ()], [np.uint8, np.float32, np.uint8])]
    ctx.emit(Op.DYNAMIC_QUANTIZE_LINEAR, [node.input[0]], names, [])


def _opt(node: onnx.NodeProto, i: int) -> str:
    return node.input[i] if len(node.input) > i and node.input[i] else ""


def _qlinear_io(ctx: LowerCtx, node: onnx.NodeProto) -> tuple[str, QParams, str, QParams]:
    """(x, x's QParams, w, y's QParams) of QLinearConv / QLinearMatMul, which share their first eight inputs:
    x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point."""
    x, w = node.input[0], node.input[3]
    ctx.check_dtypes(node, [np.uint8, np.int8], [x])
    xq = qparams_of(ctx, node, node.input[1], node.input[2], ctx.dtype(x))
    yq = qparams_of(ctx, node, node.input[6], node.input[7], ctx.dtype(node.output[0]))
    return x, xq, w, yq


@lowers("QLinearConv")
def lower_qlinear_conv(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, xq, w, yq = _qlinear_io(ctx, node)
    wv, ws, wz = ctx.require_const(node, w, node.input[4], node.input[5])
    bias = ctx.require_const(node, _opt(node, 8))[0] if _opt(node, 8) else None
    conv = onnx.helper.make_node("Conv", [x, w] + ([_opt(node, 8)] if bias is not None else []), node.output,
                                 name=node.name)
    conv.attribute.extend(node.attribute)
    emit_qconv(ctx, conv, x, xq, np.asarray(wv), np.asarray(ws, np.float64), wz, bias, QOut(node.output[0], yq),
               bias_is_int=True)


# float32 holds every integer up to 2^24 exactly: a sum of K products of two 8-bit values less their zero
# points (each at most 255 * 255) is exact in float32 while K stays at or below this.
EXACT_F32_TERMS = (1 << 24) // (255 * 255)


def _centered_f32(ctx: LowerCtx, name: str, zp: str, zp_shape: tuple[int, ...]) -> str:
    """name - zp in float32 (CAST, then BINARY SUB with zp viewed as zp_shape to broadcast): exact for 8-bit."""
    xf = _f32(ctx, name, "f32")
    if not zp:
        return xf
    d = ctx.temp(ctx.shape(name), np.float32, "centered")
    ctx.emit(Op.BINARY, [xf, _f32(ctx, view(ctx, zp, zp_shape), "zp")], [d], [BinaryFn.SUB])
    return d


def _integer_via_f32(ctx: LowerCtx, node: onnx.NodeProto, k: int, a: str, b: str, float_op: str,
                     az: str, bz: str, bz_shape: tuple[int, ...], emit) -> str:
    """The integer product of ConvInteger / MatMulInteger / QLinearMatMul with an operand, scale or zero point fed
    at run time (the int8 kernels need them at package time): both operands less their zero points in float32,
    the float kernel; exact while the K products summed stay within EXACT_F32_TERMS. Returns the float32 result
    (integers)."""
    if k > EXACT_F32_TERMS:
        raise ctx.unsupported(node, f"input(s) fed at run time with {k} products per output: more than the "
                                    f"{EXACT_F32_TERMS} a float32 sum holds exactly; bind them with --const")
    for z in (az, bz):
        if z and int(np.prod(ctx.shape(z), dtype=np.int64)) not in (1, bz_shape[0] if z == bz else 1):
            raise ctx.unsupported(node, f"zero point '{z}' of shape {list(ctx.shape(z))}")
    af = _centered_f32(ctx, a, az, ())
    bf = _centered_f32(ctx, b, bz, bz_shape if bz and int(np.prod(ctx.shape(bz))) > 1 else ())
    yf = ctx.temp(ctx.shape(node.output[0]), np.float32, "acc")
    fnode = onnx.helper.make_node(float_op, [af, bf], [yf], name=node.name)
    fnode.attribute.extend(a for a in node.attribute if node.op_type != "QLinearMatMul")
    emit(ctx, fnode)
    return yf


@lowers("ConvInteger")
def lower_conv_integer(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    x, w = node.input[0], node.input[1]
    ctx.check_dtypes(node, [np.uint8, np.int8], [x])
    xdt = ctx.dtype(x)
    if any(n and ctx.const(n) is None for n in (w, _opt(node, 2), _opt(node, 3))):
        ws = ctx.shape(w)
        yf = _integer_via_f32(ctx, node, int(np.prod(ws[1:])), x, w, "Conv", _opt(node, 2), _opt(node, 3),
                              (ws[0],) + (1,) * (len(ws) - 1), emit_conv)
        ctx.emit(Op.CAST, [yf], [node.output[0]])
        return
    (wv,) = ctx.require_const(node, w)
    xz = ctx.require_const(node, _opt(node, 2))[0] if _opt(node, 2) else None
    wz = ctx.require_const(node, _opt(node, 3))[0] if _opt(node, 3) else None
    xzs = scalar(ctx, node, xz, "x_zero_point")
    conv = onnx.helper.make_node("Conv", [x, w], node.output, name=node.name)
    conv.attribute.extend(node.attribute)
    emit_qconv(ctx, conv, x, QParams(1.0, int(xzs) if xzs is not None else 0, xdt), np.asarray(wv), None, wz, None,
               QOut(node.output[0], raw_i32=True))


def _matmul_w(ctx: LowerCtx, node: onnx.NodeProto, name: str) -> str | np.ndarray:
    c = ctx.const(name)
    return np.asarray(c) if c is not None and np.asarray(c).ndim == 2 else name


@lowers("QLinearMatMul")
def lower_qlinear_matmul(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    if any(ctx.const(node.input[i]) is None for i in (1, 2, 4, 5, 6, 7) if _opt(node, i)):
        _qlinear_matmul_at_run_time(ctx, node)
        return
    a, aq, b, yq = _qlinear_io(ctx, node)
    bs, bz = ctx.require_const(node, node.input[4], node.input[5])
    if np.asarray(bs).dtype != np.float32:
        raise ctx.unsupported(node, f"scale dtype {np.asarray(bs).dtype} (only float32)")
    emit_qmatmul(ctx, node, a, aq, _matmul_w(ctx, node, b), np.asarray(bs, np.float64), bz, None,
                 QOut(node.output[0], yq))


def _qlinear_matmul_at_run_time(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """QLinearMatMul with a scale or zero point fed at run time: the integer product through float32 (exact, see
    _integer_via_f32), times a_scale * b_scale / y_scale computed in float32 as the ONNX reference does, then
    QUANTIZE_LINEAR with scale 1 and y's zero point: saturate(round_half_even(C * m) + y_zp). C * m is rounded to
    float32 before the rounding to an integer (the reference keeps it in float64; onnxruntime rounds it to
    float32 too)."""
    a, b, y = node.input[0], node.input[3], node.output[0]
    ctx.check_dtypes(node, [np.uint8, np.int8], [a, b, y])
    scales = [node.input[i] for i in (1, 4, 6)]
    ctx.check_dtypes(node, [np.float32, np.float16], scales)
    scales = [as_f32(ctx, node, s_) for s_ in scales]   # float16 scales widen exactly
    n = ctx.shape(b)[-1]
    for name, per_col in zip(scales, (False, True, False)):
        if int(np.prod(ctx.shape(name), dtype=np.int64)) not in ((1, n) if per_col else (1,)):
            raise ctx.unsupported(node, f"scale '{name}' of shape {list(ctx.shape(name))}")
    c = _integer_via_f32(ctx, node, ctx.shape(a)[-1], a, b, "MatMul", _opt(node, 2), _opt(node, 5), (n,),
                         emit_matmul)
    flat = [view(ctx, s_, (n,) if int(np.prod(ctx.shape(s_))) == n else ()) for s_ in scales]
    m_shape = (n,) if any(ctx.shape(f) == (n,) for f in flat) else ()
    ab = ctx.temp(m_shape, np.float32, "ab")
    ctx.emit(Op.BINARY, flat[:2], [ab], [BinaryFn.MUL])
    m = ctx.temp(m_shape, np.float32, "mult")
    ctx.emit(Op.BINARY, [ab, flat[2]], [m], [BinaryFn.DIV])
    d = ctx.temp(ctx.shape(c), np.float32, "requant")
    ctx.emit(Op.BINARY, [c, m], [d], [BinaryFn.MUL])
    yz = _opt(node, 7)
    if yz and ctx.dtype(yz) != ctx.dtype(y):
        raise ctx.unsupported(node, f"y_zero_point dtype {ctx.dtype(yz)} is not y's {ctx.dtype(y)}")
    ins = [d, ctx.weight(np.ones(1, np.float32), "one")]
    if yz:
        ins.append(view(ctx, yz, (1,)) if ctx.const(yz) is None else
                   ctx.weight(np.asarray(ctx.const(yz)).astype(ctx.dtype(y)).reshape(-1), "qz"))
    ctx.emit(Op.QUANTIZE_LINEAR, ins, [y], [0])


@lowers("MatMulInteger")
def lower_matmul_integer(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    a, b = node.input[0], node.input[1]
    ctx.check_dtypes(node, [np.uint8, np.int8], [a])
    adt = ctx.dtype(a)
    az_name, bz_name = _opt(node, 2), _opt(node, 3)
    az_tensor, azv = None, 0
    if az_name:
        c = ctx.const(az_name)
        if c is None:
            if int(np.prod(ctx.shape(az_name), dtype=np.int64)) != 1:
                raise ctx.unsupported(node, "a_zero_point must be a single value")
            az_tensor = view(ctx, az_name, (1,))
        else:
            azv = int(scalar(ctx, node, c, "a_zero_point"))
    if bz_name and ctx.const(bz_name) is None:
        yf = _integer_via_f32(ctx, node, ctx.shape(a)[-1], a, b, "MatMul", az_name, bz_name, (ctx.shape(b)[-1],),
                              emit_matmul)
        ctx.emit(Op.CAST, [yf], [node.output[0]])
        return
    bz = ctx.require_const(node, bz_name)[0] if bz_name else None
    emit_qmatmul(ctx, node, a, QParams(1.0, azv, adt), _matmul_w(ctx, node, b), None, bz, None,
                 QOut(node.output[0], raw_i32=True), x_zp_tensor=az_tensor)
