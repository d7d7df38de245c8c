"""Conv: 1-D and 2-D, groups, strides, dilations, pads, auto_pad -> CONV (GEMM on packed weights) or
DEPTHWISE_CONV (group == Cin == Cout). Constant weights are packed here into the micro-kernel's panel layout;
weights fed at run time are packed by kernels in the plan (pack_panels_at_run_time).

`emit_conv(ctx, node, activation=(code, params), residual=name)` is the entry point the fusion pass
uses to fold a following activation and/or residual Add into the conv's epilogue."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from ..plan.opcodes import Op
from .data import PAD_MODES, transpose_to, view
# Epilogue activation codes (generated from wasm_kernels/spec/ops.json); quant.py and linalg.py take them from here.
from ..plan.opspec import ACT_CLIP, ACT_FUSABLE, ACT_LEAKY_RELU, ACT_NONE, ACT_RELU  # noqa: F401

# Must match wasm_kernels/src/kernels/gemm.h.
MR = 6                       # EP_GEMM_MR: rows per packed weight panel
NR = 8                       # EP_GEMM_NR: output columns per micro-tile
PANEL_FLOATS = 64 * 1024     # im2col panel budget (256 KB): cache resident, tiled over output columns
# Winograd F(2x2, 3x3) for 3x3 stride-1 convs: 2.25x fewer multiplies, paid for by the transforms, so
# only where the GEMMs dominate (enough channels). Scratch (16 V + 16 M planes) is budgeted below.
WINOGRAD_MIN_CHANNELS = 16
WINOGRAD_SCRATCH_FLOATS = 128 * 1024    # 512 KB
WINOGRAD_MIN_TILES = 16                 # tiles per block: below that the weights are streamed too often
WINOGRAD_SINGLE_BLOCK_FLOATS = 512 * 1024   # 2 MB: larger scratch allowed when it makes one block...
WINOGRAD_BIG_WEIGHTS_FLOATS = 256 * 1024    # ...of a layer whose 16 U_k are 1 MB or more (cifar10net 11% faster)

# Kernels that need a private scratch buffer per thread (DEPTHWISE_CONV's padded plane, WINOGRAD_CONV's
# 4-row buffer) get this many; a threaded runtime uses at most that many threads on such a node, so a plan
# stays valid for any thread count (docs/plan-format.md, "Threads"). The kernels' scratch functions give the same
# (EP_THREAD_SLOTS, wasm_kernels/src/shape/conv_linalg.h); tests lower it to size plans for one thread.
THREAD_SLOTS = 4

Activation = tuple[int, Sequence[float]]


def act_params(activation: Activation) -> list:
    """[code, p0, p1] as parameter words (floats become their f32 bit pattern)."""
    code, ps = activation
    ps = [float(p) for p in ps]
    if int(code) not in ACT_FUSABLE or len(ps) > 2:
        raise ValueError(f"activation {activation} cannot be fused into a linalg epilogue")
    return [int(code), *(ps + [0.0] * (2 - len(ps)))]


def pack_panels(w2d: np.ndarray) -> np.ndarray:
    """[M, K] -> ceil(M/MR) panels of MR rows, k-major inside a panel, rows past M zero (gemm.h)."""
    m, k = w2d.shape
    tiles = -(-m // MR)
    padded = np.zeros((tiles * MR, k), np.float32)
    padded[:m] = w2d
    return np.ascontiguousarray(padded.reshape(tiles, MR, k).transpose(0, 2, 1)).reshape(-1)


def pack_panels_at_run_time(ctx: LowerCtx, w: str, groups: int, mg: int, kg: int) -> str:
    """pack_panels per group of a W fed at run time, as kernels: [G, mg, kg] padded to whole panels of MR rows
    (PAD), then each panel k-major (TRANSPOSE); returns the packed tensor, flat as CONV reads it."""
    rows = _round_up(mg, MR)
    src = view(ctx, w, (groups, mg, kg))
    if rows != mg:
        padded = ctx.temp((groups, rows, kg), np.float32, "wpad")
        ctx.emit(Op.PAD, [src], [padded], [PAD_MODES["constant"], 0, 0, 0, 0, 0, 0, rows - mg, 0])
        src = padded
    panels = transpose_to(ctx, view(ctx, src, (groups, rows // MR, MR, kg)), (0, 1, 3, 2))
    return view(ctx, panels, (groups * rows * kg,))


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def conv_geometry(ctx: LowerCtx, node: onnx.NodeProto) -> dict:
    """Every Conv attribute resolved to explicit values (2-D form; a 1-D conv has kh = 1)."""
    a = ctx.attrs(node)
    xs, ws = ctx.shape(node.input[0]), ctx.shape(node.input[1])
    nsp = len(xs) - 2
    if nsp not in (1, 2) or len(ws) != len(xs):
        raise ctx.unsupported(node, f"only 1-D and 2-D convolutions are supported (input rank {len(xs)})")
    group = int(a.get("group", 1))
    ksz = list(a.get("kernel_shape", ws[2:]))
    strides = list(a.get("strides", [1] * nsp))
    dil = list(a.get("dilations", [1] * nsp))
    if list(ksz) != list(ws[2:]) or len(strides) != nsp or len(dil) != nsp:
        raise ctx.unsupported(node, "kernel_shape/strides/dilations inconsistent with the weight shape")
    if min(strides + dil + ksz) < 1:
        raise ctx.unsupported(node, "strides, dilations and kernel sizes must be >= 1")
    auto_pad = a.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    insp = list(xs[2:])
    if auto_pad == "NOTSET":
        pads = list(a.get("pads", [0] * (2 * nsp)))
        if len(pads) != 2 * nsp or min(pads) < 0:
            raise ctx.unsupported(node, f"pads {pads} invalid")
        begin, end = pads[:nsp], pads[nsp:]
    elif auto_pad == "VALID":
        begin, end = [0] * nsp, [0] * nsp
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(nsp):
            if strides[i] > 1 and not ctx.fixed(node.input[0], 2 + i):   # the pads would depend on a run-time dim
                raise ctx.unsupported(node, f"auto_pad={auto_pad} with stride {strides[i]} along a dim known only "
                                            "at run time")
            out = -(-insp[i] // strides[i])
            total = max(0, (out - 1) * strides[i] + (ksz[i] - 1) * dil[i] + 1 - insp[i])
            small = total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else total - small)
            end.append(total - small if auto_pad == "SAME_UPPER" else small)
    else:
        raise ctx.unsupported(node, f"auto_pad={auto_pad}")
    if nsp == 1:   # 1-D: the kernel sees H = 1
        insp, ksz, strides, dil, begin, end = [1] + insp, [1] + ksz, [1] + strides, [1] + dil, [0] + begin, [0] + end
    outsp = []
    for i in range(2):
        eff = dil[i] * (ksz[i] - 1) + 1
        span = insp[i] + begin[i] + end[i]
        if span < eff:
            raise ctx.unsupported(node, "the kernel window is larger than the padded input")
        outsp.append((span - eff) // strides[i] + 1)
    cin, cout = xs[1], ws[0]
    if group < 1 or cin % group or cout % group or ws[1] != cin // group:
        raise ctx.unsupported(node, f"group={group} inconsistent with {cin} input / {cout} output channels")
    want = tuple(ctx.shape(node.output[0]))
    have = (xs[0], cout, *(outsp if nsp == 2 else outsp[1:]))
    if want != have:
        raise ctx.unsupported(node, f"output shape {want} differs from the computed {have}")
    # plane_fixed: H and W (so OH, OW) are the same for every run; kernel choices may depend on them only then
    plane_fixed = not ctx.dynamic or all(ctx.fixed(node.input[0], a) for a in range(2, len(xs)))
    return dict(group=group, cin=cin, cout=cout, kh=ksz[0], kw=ksz[1], sh=strides[0], sw=strides[1],
                dh=dil[0], dw=dil[1], pt=begin[0], pl=begin[1], pb=end[0], pr=end[1],
                h=insp[0], w=insp[1], oh=outsp[0], ow=outsp[1], nsp=nsp, plane_fixed=plane_fixed)


# The scratch sizes and block widths below are defined by the kernels' C scratch functions (wasm_kernels/src/kernels,
# ep_scratch_*; a dynamic plan's core computes them there): these copies size static plans, and
# tests/test_shape_fns.py checks that both agree on every conformance case and benchmark model.

DW_LANES_TAPS = 49   # conv.c: the channels-as-lanes path's largest window


def dw_scratch_bytes(g: dict) -> int:
    """Mirror of conv.c ep_scratch_DEPTHWISE_CONV: per thread slot, the larger of the padded, column-phased input plane
    of one channel and (where its geometry allows that path) the lanes path's plane of 4 interleaved channels."""
    wp = g["w"] + g["pl"] + g["pr"]
    pw = max(-(-wp // g["sw"]), _round_up(g["ow"], 4) + (g["kw"] - 1) * g["dw"] // g["sw"])
    pw = _round_up(pw, 4)
    hp = g["h"] + g["pt"] + g["pb"]
    lanes = hp * wp * 4 if g["kh"] * g["kw"] <= DW_LANES_TAPS and g["cin"] >= 4 and g["w"] >= 4 and g["ow"] >= 4 else 0
    return max(hp * g["sw"] * pw, lanes) * 4 * THREAD_SLOTS


# Winograd F(2x2, 3x3): G (4x3) transforms a 3x3 filter (winograd.c uses B^T, A^T). F(4x4)'s G lives in
# winograd.c's WINOGRAD_FILTER, which transforms the taps at bind.
WINOGRAD_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])

# F(4x4, 3x3) takes 36 products per 16 outputs against F(2x2)'s 16 per 4 (1.78x fewer), but each block streams
# a U 2.25x larger: on planes of few 4x4 tiles (ResNet's 7x7: 4 tiles) that stream costs more than it saves.
# Its U is 4x the filter taps, so the plan carries the taps and a WINOGRAD_FILTER prologue node makes U at bind.
# Layers with fewer than 64x64 channel pairs stay F(2x2): there the transforms outweigh the saved multiplies (single
# layers, Node relaxed: 16 channels at 56x56 and 32 at 32x32 slower with F(4x4), 64 at 16x16 and 96 at 28x28
# faster; docs/design.md). The choice is float32's fastest, whatever it does to the int8/float32 ratio (the int8
# path's exact integer Winograd is F(2x2) only).
WINOGRAD_F4 = True          # False: every Winograd conv is F(2x2) (tests compare the two)
WINOGRAD_F4_MIN_TILES = 16  # 4x4 output tiles of the plane (14x14 and up)
WINOGRAD_F4_MIN_CHANNEL_PAIRS = 64 * 64
# When the plane varies from run to run (a dynamic plan), the choice is by channels alone: F(4x4) (and the int8 path's
# Winograd, quant.py) up to 256x256 channel pairs. Deeper layers sit on small planes in CNNs (resnet18's 512 channels
# at 7x7), where U's bytes outweigh the saved multiplies: F(4x4)'s U, made at bind, is arena memory (2.8x F(2x2)'s).
WINOGRAD_DYNAMIC_MAX_CHANNEL_PAIRS = 256 * 256


def winograd_eligible(g: dict) -> bool:
    """3x3, stride 1, dilation 1, group 1, 2-D (H > 1: a plane that is no row; when H varies, by rank alone), enough
    channels."""
    plane = g["h"] > 1 if g.get("plane_fixed", True) else g["nsp"] == 2
    return (g["group"] == 1 and g["kh"] == g["kw"] == 3 and g["sh"] == g["sw"] == 1 and g["dh"] == g["dw"] == 1
            and plane and min(g["cin"], g["cout"]) >= WINOGRAD_MIN_CHANNELS)


def winograd_tile(g: dict) -> int:
    """The output tile side m of an eligible conv: 4 where F(4x4, 3x3) pays, else 2. When the plane varies from run
    to run, by the channel pairs alone."""
    pairs = g["cin"] * g["cout"]
    if g.get("plane_fixed", True):
        f4 = -(-g["oh"] // 4) * -(-g["ow"] // 4) >= WINOGRAD_F4_MIN_TILES and pairs >= WINOGRAD_F4_MIN_CHANNEL_PAIRS
    else:
        f4 = WINOGRAD_F4_MIN_CHANNEL_PAIRS <= pairs <= WINOGRAD_DYNAMIC_MAX_CHANNEL_PAIRS
    return 4 if WINOGRAD_F4 and f4 else 2


def winograd_taps(w: np.ndarray) -> np.ndarray:
    """[Cout, Cin, 3, 3] -> [9, P]: the [Cout x Cin] matrix of each tap (a, b), row 3a + b, packed like U."""
    return np.stack([pack_panels(np.ascontiguousarray(w[:, :, a, b])) for a in range(3) for b in range(3)])


def winograd_filters(w: np.ndarray) -> np.ndarray:
    """[Cout, Cin, 3, 3] -> the 16 matrices U_k = (G w G^T)[i, j] (k = 4i + j), each [Cout x Cin] packed."""
    u = np.einsum("ia,ocab,jb->ijoc", WINOGRAD_G, w.astype(np.float64), WINOGRAD_G).astype(np.float32)
    return np.concatenate([pack_panels(u[i, j]) for i in range(4) for j in range(4)])


def winograd_tiles(g: dict, m: int) -> tuple[int, int]:
    """(tiles per block, scratch bytes): mirror of winograd.c's wg_tiles and ep_scratch_WINOGRAD_CONV(_F4). Every
    block streams all nk = (m+2)^2 U_k (nk Cin Cout floats) once, so deep layers (big U) on small planes take the
    whole plane in one block (up to WINOGRAD_SINGLE_BLOCK_FLOATS); otherwise blocks fit the budget, balanced in size:
    with small U, re-reading it costs less than V and M planes that outgrow the cache."""
    a = m + 2
    nk = a * a
    th, tw = -(-g["oh"] // m), -(-g["ow"] // m)
    tiles = th * tw
    rw = _round_up(m * tw + 4 * m, 4)
    per_tile = nk * (g["cin"] + g["cout"])
    big_u = nk * g["cin"] * g["cout"] >= WINOGRAD_BIG_WEIGHTS_FLOATS
    if big_u and per_tile * _round_up(tiles, NR) + a * rw <= WINOGRAD_SINGLE_BLOCK_FLOATS:
        nt = tiles
    else:
        nt = max(WINOGRAD_MIN_TILES, (WINOGRAD_SCRATCH_FLOATS - a * rw) // per_tile // NR * NR)
        blocks = -(-tiles // nt)
        nt = min(tiles, _round_up(-(-tiles // blocks), NR))
    return nt, (per_tile * _round_up(nt, NR) + a * rw * THREAD_SLOTS) * 4


def emit_conv(ctx: LowerCtx, node: onnx.NodeProto, activation: Activation = (ACT_NONE, ()),
              residual: str | None = None, output: str | None = None) -> None:
    """Lower one Conv node, with an optional fused activation and residual (added before it)."""
    ctx.check_dtypes(node, [np.float32])
    if residual is not None:
        ctx.check_dtypes(node, [np.float32], [residual])
    g = conv_geometry(ctx, node)
    w = ctx.const(node.input[1])
    w = None if w is None else np.asarray(w, np.float32)   # None: W is fed at run time
    bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
    out = output or node.output[0]
    act = act_params(activation)
    window = [g["kh"], g["kw"], g["sh"], g["sw"], g["dh"], g["dw"], g["pt"], g["pl"], g["pb"], g["pr"]]
    if g["group"] == g["cin"] == g["cout"]:
        wdw = view(ctx, node.input[1], (g["cout"], g["kh"] * g["kw"])) if w is None else \
            ctx.weight(w.reshape(g["cout"], -1), "dw")
        ctx.emit(Op.DEPTHWISE_CONV, [node.input[0], wdw, bias, residual],
                 [out], window + act, scratch_bytes=dw_scratch_bytes(g))
        return
    if w is not None and winograd_eligible(g):
        m = winograd_tile(g)
        nt, scratch = winograd_tiles(g, m)
        nt = 0 if ctx.dynamic else nt   # a dynamic plan's blocks are sized by the core (winograd.c wg_tiles)
        if m == 4:
            taps = winograd_taps(w)
            u = ctx.temp((36, taps.shape[1]), np.float32, "wino")
            ctx.prologue(Op.WINOGRAD_FILTER, [ctx.weight(taps, "taps")], [u], [4])
        else:
            u = ctx.weight(winograd_filters(w), "wino")
        ctx.emit(Op.WINOGRAD_CONV_F4 if m == 4 else Op.WINOGRAD_CONV, [node.input[0], u, bias, residual], [out],
                 [MR, *window, nt, *act, g["cout"]], scratch_bytes=scratch)
        return
    G = g["group"]
    mg, kg = g["cout"] // G, g["cin"] // G * g["kh"] * g["kw"]
    if w is None:
        packed = pack_panels_at_run_time(ctx, node.input[1], G, mg, kg)
    else:
        w2d = w.reshape(G, mg, kg)
        packed = ctx.weight(np.concatenate([pack_panels(w2d[i]) for i in range(G)]) if G > 1 else pack_panels(w2d[0]),
                            "wpk")
    # 1x1 stride-1 convs read X in place: no copy, and a plane whose size is not a multiple of 8 (7x7: 49)
    # computes its last columns one at a time down the weight panel instead of padding every row to 56.
    direct = g["kh"] == g["kw"] == g["sh"] == g["sw"] == 1 and not any(window[6:])
    if direct:
        nt, scratch = 0, 0
    else:
        n = g["oh"] * g["ow"]
        # at least 64 columns even for very deep K, so the weights are streamed few times
        nt = min(max(8 * NR, PANEL_FLOATS // max(kg, 1) // NR * NR), _round_up(n, NR))   # conv.c conv_nt
        scratch = kg * nt * 4
        nt = 0 if ctx.dynamic else nt   # a dynamic plan's panel width is derived by the core (conv_nt)
    ctx.emit(Op.CONV, [node.input[0], packed, bias, residual], [out],
             [G, MR, *window, nt, *act, g["cout"]], scratch_bytes=scratch)


@lowers("Conv")
def lower_conv(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    emit_conv(ctx, node)
