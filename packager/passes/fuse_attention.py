"""Attention fusion: MatMul(Q, Kt) -> [Mul or Div by a scalar constant] -> [masks] -> Softmax(last axis) ->
MatMul(., V) becomes one ATTENTION kernel (wasm_kernels/src/kernels/matmul.c), which computes a block of query rows'
scores, their softmax and their product with V while the block is in cache, instead of writing each head's Lq x Lk
scores to the arena and reading them back twice (Whisper's encoder: 1500 x 1500 floats per head, more than the L3).

Masks, at most one of each kind, in either order: an additive float32 mask Add(scores, M), M broadcastable to the
scores with a last dim of Lk (constant or computed at run time: BERT's (1 - attention_mask) * lowest), which becomes
the kernel's mask input; a Where(cond, scores, c) / Where(cond, c, scores) whose fill c is -inf or so large that
scores + c is c (float32's lowest: exporters' masked_fill), which becomes the additive mask Where(cond, 0, c) made
by a WHERE node (cond is usually [B, 1, 1, Lk]: the mask is that small, not the scores' size); a constant that is
0 up to a diagonal and one value past it (a causal mask, additive or as a Where's condition), which becomes the
kernel's causal flag and costs no memory. An Expand feeding a mask only to it is looked past (the kernel broadcasts).
Nodes that change nothing may sit between them (float32 Casts around the softmax, an all-zero additive mask, a
Where whose constant condition masks nothing: exporters write these for a model's default attention mask).
Matched only when every intermediate value feeds the next node alone (and is no graph output), the three tensors
are float32 with the same batch dims (no broadcast); otherwise the nodes lower one by one as before. Dims that vary
at run time (plan v2) are fused too: the core derives the block rows and the scratch from each run's shapes.
Groups are QStep records (qdq_fusion.py) at the position of their last node, so the epilogue fusion looks past
them."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..analyze import Graph
from ..ops.data import view
from ..ops.view_modes import VIEW_UNSQUEEZE
from ..plan.opcodes import Op
from .qdq_fusion import QStep
from .uses import consumers_of

# Scores per block (floats): a block's scores and their packed copy stay within L2 next to Kt's and V's panels.
BLOCK_FLOATS = 32768
SCALE_NONE, SCALE_MUL, SCALE_DIV = 0, 1, 2
# A Where's fill that absorbs any score (|s| < 2**76): scores + fill == fill, so the Where is an additive mask.
ABSORBING = -2.0 ** 100


# The most query rows per block the kernel takes (matmul.c ATT_MAX_ROWS, 4096), as a multiple of 12.
MAX_BLOCK_ROWS = 4092


def block_rows(lq: int, lk: int) -> int:
    """Query rows per block: a multiple of 12 (whole 6- and 4-row tile groups) near BLOCK_FLOATS scores, at most Lq
    and MAX_BLOCK_ROWS (a key length under 8 would ask for more)."""
    return max(1, min(lq, MAX_BLOCK_ROWS, max(12, BLOCK_FLOATS // max(lk, 1) // 12 * 12)))


def scratch_floats(d: int, lk: int, dv: int, r: int) -> int:
    """The kernel's att_scratch_floats: Kt's and V's 16-column panels, the block's Q packed, its scores, them packed."""
    panels = lambda k, n: -(-n // 16) * 16 * k  # noqa: E731
    rows = lambda k: -(-r // 4) * 6 * k  # noqa: E731
    return panels(d, lk) + panels(lk, dv) + rows(d) + r * lk + rows(lk)


def _softmax_last(node: onnx.NodeProto, rank: int, opset: int) -> bool:
    axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), -1 if opset >= 13 else 1)
    return (axis + rank if axis < 0 else axis) == rank - 1


@dataclass
class Mask:
    """What the masks between the scale and the softmax add to the scores: a tensor (a graph value, or a constant
    array), a bool condition made into one by a WHERE at emit time (cond, fill, keep_true), and/or a causal flag."""
    value: str | None = None
    array: np.ndarray | None = None
    where: tuple[str, float, bool] | None = None
    causal: tuple[int, float] | None = None
    inputs: list[str] = field(default_factory=list)   # the graph values the fused node reads for it

    def tensor(self) -> bool:
        return self.value is not None or self.array is not None or self.where is not None


def causal_of(a: np.ndarray, lq: int, lk: int) -> tuple[int, float] | None:
    """(diag, fill) when the constant additive mask a is, for every batch, 0 for key j <= query i + Lk - Lq + diag
    and one value (fill) past it; None otherwise."""
    if a.ndim < 2 or a.shape[-2:] != (lq, lk) or any(d != 1 for d in a.shape[:-2]):
        return None
    a = a.reshape(lq, lk)
    masked = a != 0
    fill = a[masked]
    if not fill.size or np.isnan(fill[0]) or not np.all(fill == fill[0]):
        return None
    diag = int(lk - masked[0].sum()) - 1 - (lk - lq)   # row 0's unmasked keys: j <= lk - lq + diag
    want = np.arange(lk)[None, :] > np.arange(lq)[:, None] + (lk - lq + diag)
    return (diag, float(fill[0])) if np.array_equal(masked, want) else None


def add_constant(a: np.ndarray, scores: tuple, mask: Mask) -> bool:
    """Adds the constant additive mask a to mask: as the causal words when triangular (two such constants on one
    diagonal, GPT-2's Where on its bias buffer and its additive 4-D mask, add their fills), else as the mask tensor,
    each dim but the last reduced to 1 where every slice along it is the same (GPT-2's mask repeats per batch).
    False when mask already holds what a would be."""
    for ax in range(a.ndim - 1):
        if a.shape[ax] > 1 and np.array_equal(a, np.broadcast_to(a.take([0], axis=ax), a.shape)):
            a = a.take([0], axis=ax)
    causal = causal_of(a, scores[-2], scores[-1])
    if causal is None:
        if mask.tensor():
            return False
        mask.array = a
    elif mask.causal is None:
        mask.causal = causal
    elif mask.causal[0] == causal[0]:
        mask.causal = (causal[0], float(np.float32(mask.causal[1]) + np.float32(causal[1])))
    else:
        return False
    return True


def _mask_shape_ok(shape, scores: tuple) -> bool:
    """Whether the kernel reads a mask of this shape in place: rank <= the scores', last dim Lk, each other dim 1
    or the scores' (right-aligned)."""
    return shape is not None and 1 <= len(shape) <= len(scores) and shape[-1] == scores[-1] and \
        all(d in (1, e) for d, e in zip(shape[:-1], scores[len(scores) - len(shape):-1]))


def fuse_attention(nodes: list, graph: Graph) -> list:
    """The step list with each matched group replaced by one QStep (emit_plan lowers it)."""
    consumers = consumers_of(nodes)
    producers = {o: n for n in nodes for o in getattr(n, "output", ()) if o}
    position = {id(n): i for i, n in enumerate(nodes)}
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

    def unexpand(value: str, scores: tuple, members: list) -> str:
        """The input of an Expand whose output only the mask node reads, when the kernel can broadcast it."""
        ex = producers.get(value)
        if isinstance(ex, onnx.NodeProto) and ex.op_type == "Expand" and ex.domain in ("", "ai.onnx") and \
                sole(value) is not None and _mask_shape_ok(shapes.get(ex.input[0]), scores) and ex.input[0] not in consts:
            members.append(ex)
            return ex.input[0]
        return value

    def mask_of(node, y: str, mask: Mask, members: list) -> bool:
        """Adds what node (an Add or a Where after the scores y) masks to mask; False when it is no mask the
        kernel takes."""
        sc = shapes.get(y)
        if len(node.output) != 1 or not sc or shapes.get(node.output[0]) != sc:
            return False
        own: list = []
        if node.op_type == "Add" and len(node.input) == 2 and node.input[0] != node.input[1]:
            m = node.input[1] if node.input[0] == y else node.input[0]
            if graph.dtypes.get(m) != TensorProto.FLOAT or not _mask_shape_ok(shapes.get(m), sc):
                return False
            m = unexpand(m, sc, own)
            if m in consts:
                if not add_constant(np.asarray(consts[m], np.float32), sc, mask):
                    return False
            elif mask.tensor():
                return False
            else:
                mask.value, mask.inputs = m, [m]
        elif node.op_type == "Where" and len(node.input) == 3 and y in node.input[1:] and node.input[1] != node.input[2]:
            keep = node.input[1] == y
            c, cond = scalar(node.input[2 if keep else 1]), node.input[0]
            if c is None or not c <= ABSORBING or graph.dtypes.get(cond) != TensorProto.BOOL or \
                    not _mask_shape_ok(shapes.get(cond), sc):
                return False
            cond = unexpand(cond, sc, own)
            if cond in consts:
                a = np.where(np.asarray(consts[cond], bool) == keep, np.float32(0), np.float32(c)).astype(np.float32)
                if not add_constant(a, sc, mask):
                    return False
            elif mask.tensor():
                return False
            else:
                mask.where, mask.inputs = (cond, c, keep), [cond]
        else:
            return False
        members += [node, *own]
        return True

    groups: dict[int, QStep] = {}
    taken: set[int] = set()
    for mm1 in nodes:
        if not isinstance(mm1, onnx.NodeProto) or mm1.op_type != "MatMul" or mm1.domain not in ("", "ai.onnx") \
                or id(mm1) in taken:
            continue
        q, kt = mm1.input[0], mm1.input[1]
        sq, sk = shapes.get(q), shapes.get(kt)
        if not sq or not sk or len(sq) < 2 or len(sq) != len(sk) or sq[:-2] != sk[:-2] or not sk[-1]:
            continue
        members, kind, scale, mask = [mm1], SCALE_NONE, 1.0, Mask()
        y, nxt = follow(mm1.output[0], members)
        if nxt is not None and nxt.op_type in ("Mul", "Div") and len(nxt.input) == 2:
            other = nxt.input[1] if nxt.input[0] == y else nxt.input[0]
            s = scalar(other)
            if s is not None and other != y and (nxt.op_type == "Mul" or nxt.input[1] == other):
                kind, scale = (SCALE_MUL if nxt.op_type == "Mul" else SCALE_DIV), s
                members.append(nxt)
                y, nxt = follow(nxt.output[0], members)
        while nxt is not None and nxt.op_type in ("Add", "Where") and mask_of(nxt, y, mask, members):
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
        members.sort(key=lambda n: position[id(n)])   # an Expand looked past comes before its mask node
        step = QStep("Attention", mm1.name or out, [q, kt, v, *mask.inputs], [out], mm1)
        step.emit_plan = lambda ctx, m=tuple(members), k=kind, s=scale, mk=mask: emit_attention(ctx, m, k, s, mk)
        groups[id(mm2)] = step
        taken.update(id(m) for m in members)
    if not groups:
        return nodes
    return [groups.get(id(n), n) for n in nodes if id(n) in groups or id(n) not in taken]


def emit_attention(ctx, members: tuple, kind: int, scale: float, mask: Mask) -> None:
    """One ATTENTION node (after the WHERE making a condition's additive mask). A dynamic plan writes block_rows as
    0: the core derives it from the run's Lq and Lk by block_rows' rule (matmul.c att_block_rows), and sizes the
    scratch by it; the scratch written is the one at the plan's shapes."""
    mm1, mm2 = members[0], members[-1]
    q, kt, v, y = mm1.input[0], mm1.input[1], mm2.input[1], mm2.output[0]
    sq, sk, sv = ctx.shape(q), ctx.shape(kt), ctx.shape(v)
    lq, d, lk, dv = sq[-2], sq[-1], sk[-1], sv[-1]
    r = block_rows(lq, lk)
    m = mask.value
    if mask.array is not None:
        m = ctx.weight(mask.array, "mask")
    elif mask.where is not None:
        cond, c, keep = mask.where
        zero, fill = ctx.weight(np.zeros((), np.float32), "zero"), ctx.weight(np.asarray(c, np.float32), "fill")
        m = ctx.temp(ctx.shape(cond), np.float32, "mask")
        ctx.emit(Op.WHERE, [cond, zero, fill] if keep else [cond, fill, zero], [m])
    if m:   # the kernel takes the mask at Y's rank
        m = _mask_at_rank(ctx, m, len(sq))
    ctx._ensure(y)
    causal = [1, mask.causal[0], np.float32(mask.causal[1])] if mask.causal else []
    words = [kind, np.float32(scale), 0 if ctx.dynamic else r, *causal]
    ctx.emit(Op.ATTENTION, [q, kt, v, *([m] if m else [])], [y], words,
             scratch_bytes=4 * scratch_floats(d, lk, dv, r))


def _mask_at_rank(ctx, m: str, rank: int) -> str:
    """The mask with leading 1s up to `rank`: an alias, or in a dynamic plan (the mask's dims may vary) a VIEW of
    a computed mask, which gives it its dims per run."""
    ctx._ensure(m)
    shape = tuple(ctx.shape(m))
    lifted = (1,) * (rank - len(shape)) + shape
    if lifted == shape or not ctx.dynamic or ctx.tensors[m].data is not None:
        return view(ctx, m, lifted, "mask")
    out = ctx.temp(lifted, np.float32, "mask")
    ctx.alias(out, m)
    ctx.emit(Op.VIEW, [m], [out], [VIEW_UNSQUEEZE, 0, rank - len(shape), *range(rank - len(shape))])
    return out
