"""Gemm -> GEMM (fused bias/activation/residual epilogue), MatMul -> MATMUL (batched, broadcast).

A constant B is stored as [K, N] (the layout the micro-kernel reads), or as [N, K] with transB when M = 1
(the kernel's dot products read B's rows; a one-row MatMul by a constant B becomes that GEMV too); a runtime B
with transB and M > 1 is transposed into scratch by the kernel. `emit_gemm` is the fusion pass's entry point."""
from __future__ import annotations

import numpy as np
import onnx

from ..lowering import LowerCtx, lowers
from ..plan.opcodes import DTYPES, Op
from .conv import ACT_NONE, MR, Activation, act_params
from .data import view
from .elementwise import in_f32

BIAS_NONE, BIAS_ROW, BIAS_COL, BIAS_FULL, BIAS_SCALAR = 0, 1, 2, 3, 4


# The scratch sizes below are defined by matmul.c's ep_scratch_GEMM / ep_scratch_MATMUL (a dynamic plan's core
# computes them there): these copies size static plans; tests/test_shape_fns.py checks that both agree.

def packed_a_bytes(m: int, k: int) -> int:
    return -(-m // MR) * MR * k * 4


def packed_rows_bytes(m: int, k: int) -> int:
    """A packed for the B-panel path of GEMM/MATMUL (matmul.c PR): groups of 4 rows in MR-row panels, the wasm
    SIMD128 kernel's choice; the other targets need packed_a_bytes, which is less."""
    return -(-m // 4) * MR * k * 4


def a_and_b_bytes(m: int, k: int, n: int) -> int:
    """Scratch of GEMM (no transB) and MATMUL: packed A, and B in panels when that pays (packed_b_bytes)."""
    b = packed_b_bytes(m, k, n)
    return (packed_rows_bytes(m, k) if b else packed_a_bytes(m, k)) + b


def emit_gemm(ctx: LowerCtx, node: onnx.NodeProto, activation: Activation = (ACT_NONE, ()),
              residual: str | None = None, output: str | None = None) -> None:
    """Lower one Gemm node, with an optional fused activation and residual (added before it)."""
    ctx.check_dtypes(node, [np.float32])
    if residual is not None:
        ctx.check_dtypes(node, [np.float32], [residual])
    a = ctx.attrs(node)
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    ta, tb = int(a.get("transA", 0)), int(a.get("transB", 0))
    sa, sb = ctx.shape(node.input[0]), ctx.shape(node.input[1])
    if len(sa) != 2 or len(sb) != 2:
        raise ctx.unsupported(node, "Gemm operands must be 2-D")
    m, k = (sa[1], sa[0]) if ta else sa
    kb, n = (sb[1], sb[0]) if tb else sb
    if k != kb:
        raise ctx.unsupported(node, f"inner dimensions differ ({k} vs {kb})")
    out = output or node.output[0]
    if tuple(ctx.shape(node.output[0])) != (m, n):
        raise ctx.unsupported(node, f"output shape {ctx.shape(node.output[0])} is not ({m}, {n})")
    b_name = node.input[1]
    bc = ctx.const(b_name)
    m_one = m == 1 and ctx.fixed(node.input[0], 1 if ta else 0)   # (an M that varies: B as [K, N], for any M)
    if bc is not None and m_one and not tb:   # a GEMV reads B's rows [N, K] contiguously (matmul.c)
        b_name, tb = ctx.weight(np.ascontiguousarray(np.asarray(bc, np.float32).T), "bT"), 1
    elif bc is not None and not m_one and tb:   # constant B: store it as [K, N] once instead of transposing per run
        b_name, tb = ctx.weight(np.ascontiguousarray(np.asarray(bc, np.float32).T), "bT"), 0
    c = node.input[2] if len(node.input) > 2 and node.input[2] else None
    mode = BIAS_NONE
    if c is not None:
        sc = tuple(ctx.shape(c))
        numel = int(np.prod(sc, dtype=np.int64))
        if numel == 1:
            mode = BIAS_SCALAR
        elif len(sc) == 1 or (len(sc) == 2 and sc[0] == 1):
            mode = BIAS_COL if sc[-1] == n else None
        elif len(sc) == 2 and sc == (m, 1):
            mode = BIAS_ROW
        elif len(sc) == 2 and sc == (m, n):
            mode = BIAS_FULL
        else:
            mode = None
        if mode is None:
            raise ctx.unsupported(node, f"C of shape {sc} does not broadcast to ({m}, {n})")
    # matmul.c ep_scratch_GEMM
    scratch = 0 if m == 1 and tb else (packed_a_bytes(m, k) + k * n * 4 if tb else a_and_b_bytes(m, k, n))
    ctx.emit(Op.GEMM, [node.input[0], b_name, c, residual], [out],
             [ta, tb, alpha, beta, mode, *act_params(activation)], scratch_bytes=scratch)


@lowers("Gemm")
def lower_gemm(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    emit_gemm(ctx, node)


@lowers("MatMul")
def lower_matmul(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    if in_f32(ctx, node, lower_matmul):   # float16 / float64: a float32 product, rounded back
        return
    emit_matmul(ctx, node)


def emit_matmul(ctx: LowerCtx, node: onnx.NodeProto, bias: str | None = None,
                activation: Activation = (ACT_NONE, ()), residual: str | None = None) -> None:
    """Lower one MatMul; with a fused epilogue (packager/passes/fuse_epilogue.py) when a bias (N elements, added
    along the last dim), an activation or a residual (the output's shape) is given: node.output[0] is then the
    group's output, which has the MatMul's shape."""
    ctx.check_dtypes(node, [np.float32])
    for x in (bias, residual):
        if x is not None:
            ctx.check_dtypes(node, [np.float32], [x])
    sa, sb = tuple(ctx.shape(node.input[0])), tuple(ctx.shape(node.input[1]))
    if not sa or not sb:
        raise ctx.unsupported(node, "MatMul operands must have rank >= 1")
    a_name, b_name = node.input[0], node.input[1]
    # numpy rules: a 1-D A is [1, K] (M dropped from the output), a 1-D B is [K, 1] (N dropped).
    va = (1, *sa) if len(sa) == 1 else sa
    vb = (*sb, 1) if len(sb) == 1 else sb
    if va[-1] != vb[-2]:
        raise ctx.unsupported(node, f"inner dimensions differ ({va[-1]} vs {vb[-2]})")
    m, k, n = va[-2], va[-1], vb[-1]
    ba, bb = va[:-2], vb[:-2]
    r = max(len(ba), len(bb))
    ba_p, bb_p = (1,) * (r - len(ba)) + ba, (1,) * (r - len(bb)) + bb
    batch = []
    for x, y in zip(ba_p, bb_p):
        if x != y and 1 not in (x, y):
            raise ctx.unsupported(node, f"batch dims {ba} and {bb} do not broadcast")
        batch.append(y if x == 1 else x)
    out_shape = tuple(ctx.shape(node.output[0]))
    want = (*batch, *((m,) if len(sa) > 1 else ()), *((n,) if len(sb) > 1 else ()))
    if out_shape != tuple(want):
        raise ctx.unsupported(node, f"output shape {out_shape} differs from the computed {tuple(want)}")
    fold = not ctx.dynamic or (ctx.fixed(a_name) and ctx.fixed(node.output[0]))   # a view needs fixed dims
    if not bb and ba and fold:   # B shared by every batch: fold A's batch dims into M (A is contiguous)
        m = int(np.prod(ba, dtype=np.int64)) * m
        va, vy = (m, k), (m, n)
    else:
        va, vy = (*ba_p, m, k) if r else (m, k), (*batch, m, n)
        vb = (*bb_p, k, n) if r else (k, n)
    ctx._ensure(node.output[0])
    rows_fixed = all(ctx.fixed(a_name, i) for i in range(len(sa) - 1))
    if bias is not None and (len(sb) < 2 or int(np.prod(ctx.shape(bias), dtype=np.int64)) != n):
        raise ctx.unsupported(node, f"fused bias of shape {ctx.shape(bias)} is not {n} values along N")
    if residual is not None and tuple(ctx.shape(residual)) != out_shape:
        raise ctx.unsupported(node, f"fused residual of shape {ctx.shape(residual)} is not {out_shape}")
    if m == 1 and fold and rows_fixed and not bb and len(sb) >= 2 and ctx.const(b_name) is not None:
        emit_gemv(ctx, node, a_name, np.asarray(ctx.const(b_name), np.float32).reshape(k, n), bias, activation, residual)
        return
    # B in panels pays from 16 rows of A on; when A's rows vary from run to run, for any constant B
    bc = ctx.const(b_name) if PACK_CONST_B and len(sb) >= 2 and not bb and (m >= 16 or not rows_fixed) else None
    if bc is not None:   # constant B stored in 16-column panels: the kernel multiplies it with no copy per run
        ins = [view(ctx, a_name, va, "a"), ctx.weight(panels_b(np.asarray(bc, np.float32).reshape(k, n)), "bpanels")]
    else:
        ins = [view(ctx, a_name, va, "a"), view(ctx, b_name, vb, "b")]
    params: list = []
    if bias is not None or residual is not None or activation[0] != ACT_NONE:
        ins += [view(ctx, bias, (n,), "bias") if bias is not None else None,
                view(ctx, residual, vy, "r") if residual is not None else None]
        params = [BIAS_COL if bias is not None else BIAS_NONE, *act_params(activation)]
    if bc is not None:
        params = (params or [BIAS_NONE, *act_params((ACT_NONE, ()))]) + [B_PANELS, n]   # n: the panels round it up
        ctx.emit(Op.MATMUL, ins, [view(ctx, node.output[0], vy, "y")], params, scratch_bytes=packed_rows_bytes(m, k))
        return
    ctx.emit(Op.MATMUL, ins, [view(ctx, node.output[0], vy, "y")], params, scratch_bytes=a_and_b_bytes(m, k, n))


def stored_once(ctx: LowerCtx, array: np.ndarray, hint: str) -> str:
    """ctx.weight(array), or the weight already stored with the same dtype, shape and bytes: GPT-2's output
    projection is its token embedding's table (tied), 154 MB that the Gather already stores."""
    for t in ctx.tensors.values():   # compared in place: a copy of a 1-2 GB weight's bytes would double it
        if (t.data is not None and t.shape == array.shape and DTYPES.get(t.dtype) == array.dtype and
                np.array_equal(np.frombuffer(t.data, array.dtype).reshape(array.shape), array)):
            return t.name
    return ctx.weight(array, hint)


def emit_gemv(ctx: LowerCtx, node: onnx.NodeProto, a_name: str, b: np.ndarray, bias: str | None,
              activation: Activation, residual: str | None) -> None:
    """A MatMul of one row by a constant B [K, N] (a decoder's token step) as GEMM's GEMV: B stored as [N, K], so
    each output is one dot product over a contiguous row and B streams once (as [K, N] the tiles read it N floats
    apart per depth and compute 6-row tiles for one row). A B^T equal to a weight already stored (a tied
    embedding's table) is stored once (stored_once)."""
    k, n = b.shape
    ins = [view(ctx, a_name, (1, k), "a"), stored_once(ctx, np.ascontiguousarray(b.T), "bT"),
           view(ctx, bias, (n,), "bias") if bias is not None else None,
           view(ctx, residual, (1, n), "r") if residual is not None else None]
    ctx.emit(Op.GEMM, ins, [view(ctx, node.output[0], (1, n), "y")],
             [0, 1, 1.0, 1.0, BIAS_COL if bias is not None else BIAS_NONE, *act_params(activation)])


B_PANELS = 1   # MATMUL's 5th param: B is stored as [ceil(N/16), K, 16] panels, then N (docs/plan-format.md)
PACK_CONST_B = True   # False: plans as before B_PANELS (row-major constant B, packed per run; tests of old plans)
PANEL = 16


def panels_b(b: np.ndarray) -> np.ndarray:
    """B [K, N] as matmul.c's pack_b lays it out: [ceil(N/16), K, 16], panel j holding columns 16j..16j+15, zero
    past N."""
    k, n = b.shape
    np_ = -(-n // PANEL)
    padded = np.zeros((k, np_ * PANEL), np.float32)
    padded[:, :n] = b
    return np.ascontiguousarray(padded.reshape(k, np_, PANEL).transpose(1, 0, 2))


def packed_b_bytes(m: int, k: int, n: int) -> int:
    """Room for MATMUL's B in 16-column panels (wasm_kernels/src/kernels/matmul.c): copying B costs k x n,
    worth it once A has a few row panels to multiply it with."""
    return -(-n // 16) * 16 * k * 4 if m >= 16 else 0
