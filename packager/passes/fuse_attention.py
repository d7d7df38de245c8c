"""Attention fusion: MatMul(Q, Kt) -> [Mul or Div by a scalar constant] -> Softmax(last axis) -> MatMul(., V) becomes
one ATTENTION kernel (wasm_kernels/src/kernels/matmul.c), which computes a block of query rows' scores, their
softmax and their product with V while the block is in cache, instead of writing each head's Lq x Lk scores to the
arena and reading them back twice (Whisper's encoder: 1500 x 1500 floats per head, more than the L3 cache).

Nodes that change nothing may sit between them (float32 Casts around the softmax, an all-zero additive mask, a Where
whose constant condition masks nothing: exporters write these for a model's default attention mask).
Matched only when every intermediate value feeds the next node alone (and is no graph output), the three tensors
are float32 with the same batch dims (no broadcast) and the shapes are fixed; otherwise, and on plans whose dims
vary at run time, the nodes lower one by one as before. Groups are QStep records (qdq_fusion.py) at the position
of their last node, so the epilogue fusion looks past them."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..analyze import Graph
from ..lowering.registry import REGISTRY, registered_name
from ..plan.opcodes import Op
from .qdq_fusion import QStep
from .uses import consumers_of

# Scores per block (floats): a block's scores and their packed copy stay within L2 next to Kt's and V's panels.
BLOCK_FLOATS = 32768
SCALE_NONE, SCALE_MUL, SCALE_DIV = 0, 1, 2


def block_rows(lq: int, lk: int) -> int:
    """Query rows per block: a multiple of 12 (whole 6- and 4-row tile groups) near BLOCK_FLOATS scores, at most Lq."""
    return max(1, min(lq, max(12, BLOCK_FLOATS // max(lk, 1) // 12 * 12)))


def scratch_floats(d: int, lk: int, dv: int, r: int) -> int:
    """The kernel's att_scratch_floats: Kt's and V's 16-column panels, the block's Q packed, its scores, them packed."""
    panels = lambda k, n: -(-n // 16) * 16 * k  # noqa: E731
    rows = lambda k: -(-r // 4) * 6 * k  # noqa: E731
    return panels(d, lk) + panels(lk, dv) + rows(d) + r * lk + rows(lk)


def _softmax_last(node: onnx.NodeProto, rank: int, opset: int) -> bool:
    axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), -1 if opset >= 13 else 1)
    return (axis + rank if axis < 0 else axis) == rank - 1


def fuse_attention(nodes: list, graph: Graph) -> list:
    """The step list with each matched group replaced by one QStep (emit_plan lowers it)."""
    consumers = consumers_of(nodes)
    outputs, shapes, consts = set(graph.outputs), graph.shapes, graph.consts

    def sole(value: str):
        c = consumers.get(value, [])
        return c[0] if len(c) == 1 and value not in outputs and isinstance(c[0], onnx.NodeProto) \
            and c[0].domain in ("", "ai.onnx") else None

    def scalar(name: str) -> float | None:
        v = consts.get(name)
        return float(np.asarray(v).reshape(-1)[0]) if v is not None and np.asarray(v).size == 1 and \
            np.asarray(v).dtype == np.float32 else None

    def identity(node, x: str) -> bool:
        """Whether node passes x through unchanged: a Cast to float32 of float32, an Identity, an Add of constant
        zeros or a Where whose constant condition picks x everywhere (an exporter's attention mask with nothing
        masked), neither broadcasting x to a larger shape."""
        if node.op_type == "Identity" or (node.op_type == "Cast" and graph.dtypes.get(x) == TensorProto.FLOAT and
                                          next((a.i for a in node.attribute if a.name == "to"), None) == TensorProto.FLOAT):
            return True
        if shapes.get(node.output[0]) != shapes.get(x):
            return False
        if node.op_type == "Add" and len(node.input) == 2:
            c = consts.get(node.input[1] if node.input[0] == x else node.input[0])
            return c is not None and c.dtype == np.float32 and not np.any(c)
        if node.op_type == "Where" and len(node.input) == 3 and node.input[0] in consts and x in node.input[1:]:
            cond = np.asarray(consts[node.input[0]], bool)
            return bool(np.all(cond)) if node.input[1] == x and node.input[2] != x else \
                not np.any(cond) if node.input[2] == x and node.input[1] != x else False
        return False

    def follow(y: str, members: list):
        """(the value after y's pass-through nodes, its sole consumer); the pass-through nodes join members."""
        nxt = sole(y)
        while nxt is not None and len(nxt.output) == 1 and identity(nxt, y):
            members.append(nxt)
            y, nxt = nxt.output[0], sole(nxt.output[0])
        return y, nxt

    groups: dict[int, QStep] = {}
    taken: set[int] = set()
    for mm1 in nodes:
        if not isinstance(mm1, onnx.NodeProto) or mm1.op_type != "MatMul" or mm1.domain not in ("", "ai.onnx") \
                or id(mm1) in taken:
            continue
        q, kt = mm1.input[0], mm1.input[1]
        sq, sk = shapes.get(q), shapes.get(kt)
        if not sq or not sk or len(sq) < 2 or len(sq) != len(sk) or sq[:-2] != sk[:-2]:
            continue
        members, kind, scale = [mm1], SCALE_NONE, 1.0
        y, nxt = follow(mm1.output[0], members)
        if nxt is not None and nxt.op_type in ("Mul", "Div") and len(nxt.input) == 2:
            other = nxt.input[1] if nxt.input[0] == y else nxt.input[0]
            s = scalar(other)
            if s is not None and other != y and (nxt.op_type == "Mul" or nxt.input[1] == other):
                kind, scale = (SCALE_MUL if nxt.op_type == "Mul" else SCALE_DIV), s
                members.append(nxt)
                y, nxt = follow(nxt.output[0], members)
        if nxt is None or nxt.op_type != "Softmax" or not _softmax_last(nxt, len(sq), graph.opset):
            continue
        sm = nxt
        members.append(sm)
        p, mm2 = follow(sm.output[0], members)
        if mm2 is None or mm2.op_type != "MatMul" or mm2.input[0] != p or mm2.input[1] == p:
            continue
        v, out = mm2.input[1], mm2.output[0]
        sv, sy = shapes.get(v), shapes.get(out)
        if not sv or len(sv) != len(sq) or sv[:-2] != sq[:-2] or sv[-2] != sk[-1] or sy != (*sq[:-1], sv[-1]):
            continue
        if any(graph.dtypes.get(x) != TensorProto.FLOAT for x in (q, kt, v, out)):
            continue
        members.append(mm2)
        step = QStep("Attention", mm1.name or out, [q, kt, v], [out], mm1)
        step.emit_plan = lambda ctx, m=tuple(members), k=kind, s=scale: emit_attention(ctx, m, k, s)
        groups[id(mm2)] = step
        taken.update(id(m) for m in members)
    if not groups:
        return nodes
    return [groups.get(id(n), n) for n in nodes if id(n) in groups or id(n) not in taken]


def emit_attention(ctx, members: tuple, kind: int, scale: float) -> None:
    """One ATTENTION node; the members' own lowerings when a dim varies at run time (the block scratch is sized
    from fixed shapes)."""
    mm1, mm2 = members[0], members[-1]
    names = (mm1.input[0], mm1.input[1], mm2.input[1], mm2.output[0])
    if ctx.dynamic and not all(ctx.fixed(x) for x in names[:3]):
        for node in members:
            ctx._node = node
            REGISTRY[registered_name(node)](ctx, node)
        return
    q, kt, v, y = names
    sq, sk, sv = ctx.shape(q), ctx.shape(kt), ctx.shape(v)
    lq, d, lk, dv = sq[-2], sq[-1], sk[-1], sv[-1]
    r = block_rows(lq, lk)
    ctx._ensure(y)
    ctx.emit(Op.ATTENTION, [q, kt, v], [y], [kind, np.float32(scale), r], scratch_bytes=4 * scratch_floats(d, lk, dv, r))
