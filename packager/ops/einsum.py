"""Einsum of one or two float32 operands (float16 / float64 through float32) as REDUCE (sum over labels no one else needs), TRANSPOSE and one batched
MATMUL: A -> [batch, m, k], B -> [batch, k, n], their product viewed and transposed into the output's order.
A label repeated within one operand (a diagonal, a trace) takes the diagonal first: the two axes moved last,
viewed as one, every (n+1)-th element (SLICE). Refused precisely: more than two operands, a label repeated in the
output, labels shared with different extents (broadcasting a size-1 dim)."""
from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper

from ..lowering import LowerCtx, lowers
from ..plan.opcodes import Op
from .data import slice_words, transpose_to, view
from .elementwise import in_f32
from .linalg import emit_matmul


def _labels(ctx: LowerCtx, node: onnx.NodeProto, eq: str) -> tuple[list[str], str]:
    """Each operand's labels (an ellipsis expanded into digits, right-aligned across operands) and the output's."""
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(node.input):
        raise ctx.unsupported(node, f"equation {eq!r} has {len(terms)} operands for {len(node.input)} inputs")
    ranks = [len(ctx.shape(n)) for n in node.input]
    n_ell = [r - len(t.replace("...", "")) if "..." in t else 0 for t, r in zip(terms, ranks)]
    width = max(n_ell, default=0)
    ell = "".join(str(d) for d in range(width))
    ops = []
    for t, n, r in zip(terms, n_ell, ranks):
        s = t.replace("...", ell[width - n:])
        if len(s) != r or not all(c.isalpha() or c.isdigit() for c in s):
            raise ctx.unsupported(node, f"term {t!r} does not match an operand of rank {r}")
        ops.append(s)
    if arrow:
        out = rhs.replace("...", ell)
    else:   # implicit output: the ellipsis, then the labels seen once, in alphabetical order
        once = sorted(c for c in set("".join(ops)) if c.isalpha() and "".join(ops).count(c) == 1)
        out = ell + "".join(once)
    return ops, out


def _reduce_to(ctx: LowerCtx, src: str, labels: str, keep: str) -> tuple[str, str]:
    """`src` summed over the labels not in `keep` (REDUCE sum); returns the tensor and its labels."""
    drop = [i for i, c in enumerate(labels) if c not in keep]
    if not drop:
        return src, labels
    xs = ctx.shape(src)
    kept = "".join(c for c in labels if c in keep)
    t = ctx.temp([xs[i] for i, c in enumerate(labels) if c in keep], np.float32, "einsum_sum")
    ctx.emit(Op.REDUCE, [src], [t], [0, sum(1 << i for i in drop)])
    return t, kept


def _diagonal(ctx: LowerCtx, node: onnx.NodeProto, src: str, labels: str) -> tuple[str, str]:
    """`src` with each label repeated within `labels` reduced to one axis, its diagonal; returns tensor and labels."""
    while (c := next((c for c in labels if labels.count(c) > 1), None)) is not None:
        i = labels.index(c)
        j = labels.index(c, i + 1)
        xs = ctx.shape(src)
        if xs[i] != xs[j]:
            raise ctx.unsupported(node, f"label {c!r} repeated with extents {xs[i]} and {xs[j]}")
        others = [k for k in range(len(labels)) if k not in (i, j)]
        n, rest = xs[i], [xs[k] for k in others]
        flat = view(ctx, transpose_to(ctx, src, others + [i, j]), (*rest, n * n))
        d = ctx.temp((*rest, n), np.float32, "einsum_diag")
        ctx.emit(Op.SLICE, [flat], [d], slice_words(len(rest) + 1, [0], [n * n], [len(rest)], [n + 1]))
        src, labels = d, "".join(labels[k] for k in others) + c
    return src, labels


@lowers("Einsum")
def lower_einsum(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    if in_f32(ctx, node, lower_einsum):   # float16 / float64 contracted in float32, the result rounded back
        return
    ctx.check_dtypes(node, [np.float32])
    eq = ctx.attrs(node)["equation"]
    eq = eq.decode() if isinstance(eq, bytes) else eq
    if len(node.input) not in (1, 2):
        raise ctx.unsupported(node, f"{len(node.input)} operands: only one or two are supported")
    ops, out = _labels(ctx, node, eq)
    if len(set(out)) != len(out):
        raise ctx.unsupported(node, f"equation {eq!r}: a label repeated in the output is not supported")
    srcs, ops = map(list, zip(*(_diagonal(ctx, node, n, s) for n, s in zip(node.input, ops))))
    extent: dict[str, int] = {}
    for s, name in zip(ops, srcs):
        for c, d in zip(s, ctx.shape(name)):
            if extent.setdefault(c, d) != d:
                raise ctx.unsupported(node, f"label {c!r} has extents {extent[c]} and {d} (broadcasting is not supported)")
    if any(c not in extent for c in out):
        raise ctx.unsupported(node, f"equation {eq!r}: an output label appears in no operand")
    y = node.output[0]
    if tuple(ctx.shape(y)) != tuple(extent[c] for c in out):
        raise ctx.unsupported(node, f"output shape {ctx.shape(y)} differs from the equation's")
    if len(ops) == 1:
        t, lab = _reduce_to(ctx, srcs[0], ops[0], out)
        transpose_to(ctx, t, [lab.index(c) for c in out], y)
        return
    (a, la), (b, lb) = (_reduce_to(ctx, n, s, out + t) for n, s, t in
                        ((srcs[0], ops[0], ops[1]), (srcs[1], ops[1], ops[0])))
    batch = [c for c in la if c in lb and c in out]
    contract = [c for c in la if c in lb and c not in out]
    am = [c for c in la if c not in lb]
    bn = [c for c in lb if c not in la]
    size = lambda cs: math.prod(extent[c] for c in cs)   # noqa: E731
    bt, m, k, n = size(batch), size(am), size(contract), size(bn)
    a3 = view(ctx, transpose_to(ctx, a, [la.index(c) for c in batch + am + contract]), (bt, m, k))
    b3 = view(ctx, transpose_to(ctx, b, [lb.index(c) for c in batch + contract + bn]), (bt, k, n))
    p = ctx.temp((bt, m, n), np.float32, "einsum_mm")
    emit_matmul(ctx, helper.make_node("MatMul", [a3, b3], [p], name=node.name or node.output[0]))
    lab = "".join(batch + am + bn)
    pv = view(ctx, p, tuple(extent[c] for c in lab))
    transpose_to(ctx, pv, [lab.index(c) for c in out], y)
