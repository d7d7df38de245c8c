"""Fusion-aware QDQ placement: keep Conv/Gemm/MatMul and their activation adjacent in a QDQ graph.

onnxruntime's quantizer puts a QuantizeLinear/DequantizeLinear pair on every quantized tensor, so an
activation that followed a Conv ends up behind one:

    naive:  P -> y -> Q1 -> DQ1 -> Act -> z -> Q2 -> DQ2 -> ...       (P = Conv | Gemm | MatMul)

which severs P from Act (no fused conv+activation kernel) and rounds twice. For Act with
f(a*x) = a*f(x), a > 0 (Relu, LeakyRelu with alpha >= 0, Clip(0, M)) and zero points 0, DQ1 commutes with
Act, and a monotone quantizer commutes with Relu/Clip, so the activation can move in front of the pair:

    fused:  P -> y -> Act -> Q2 -> DQ2 -> ...     (Q1/DQ1 removed: Act's output is quantized once)
    fused:  P -> y -> Act -> Q1 -> DQ1 -> z       (no Q2 follows: the pair is only moved)

Exactness (tests/test_quantize_qdq.py): with Relu, and with Clip when Q1 and Q2 share their scale (what
onnxruntime produces with symmetric activations), the rewritten graph computes identical values. Otherwise
(LeakyRelu, Clip with different scales) the fused graph rounds once instead of twice: outputs differ by at
most one quantization step of the activation's output."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from .. import weights
from ..passes.uses import consumers_of

PRODUCERS = ("Conv", "Gemm", "MatMul")
ACTIVATIONS = ("Relu", "LeakyRelu", "Clip")


@dataclass
class PlacementReport:
    moved: int = 0                 # activations moved in front of their Q/DQ pair
    pairs_removed: int = 0         # Q/DQ pairs removed with it
    nodes_before: int = 0
    nodes_after: int = 0

    def as_dict(self) -> dict:
        return {"activations_moved": self.moved, "qdq_pairs_removed": self.pairs_removed,
                "nodes_before": self.nodes_before, "nodes_after": self.nodes_after}


def _consts(g: onnx.GraphProto) -> dict[str, np.ndarray]:
    out = {i.name: weights.to_array(i) for i in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            out[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return out


def _zero_point_is_zero(node: onnx.NodeProto, consts: dict[str, np.ndarray]) -> bool:
    if len(node.input) < 3 or not node.input[2]:
        return True    # absent zero point = 0
    zp = consts.get(node.input[2])
    return zp is not None and not np.any(zp)


def _positively_homogeneous(act: onnx.NodeProto, consts: dict[str, np.ndarray]) -> bool:
    """Relu, LeakyRelu(alpha >= 0), Clip(min = 0, max > 0 or absent)."""
    if act.op_type == "Relu":
        return True
    if act.op_type == "LeakyRelu":
        alpha = next((a.f for a in act.attribute if a.name == "alpha"), 0.01)
        return alpha >= 0
    if act.op_type == "Clip":
        attrs = {a.name: a.f for a in act.attribute}
        if "min" in attrs or "max" in attrs:          # opset < 11
            return attrs.get("min", -np.inf) == 0 and attrs.get("max", np.inf) > 0
        if len(act.input) < 2 or not act.input[1] or act.input[1] not in consts:
            return False
        lo = consts[act.input[1]]
        hi = consts.get(act.input[2]) if len(act.input) > 2 and act.input[2] else np.array(np.inf)
        return hi is not None and lo.size == 1 and float(lo) == 0.0 and float(hi) > 0
    return False


def fusion_aware_placement(model: onnx.ModelProto) -> tuple[onnx.ModelProto, PlacementReport]:
    """Rewrite P -> Q -> DQ -> Act (see module doc). Returns a new model and what changed."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    consts = _consts(g)
    rep = PlacementReport(nodes_before=len(g.node))
    producer = {o: n for n in g.node for o in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = consumers_of(list(g.node))
    graph_outputs = {o.name for o in g.output}

    def only_consumer(name: str) -> onnx.NodeProto | None:
        c = consumers.get(name, [])
        return c[0] if len(c) == 1 and name not in graph_outputs else None

    removed: set[int] = set()
    for act in list(g.node):
        if act.op_type not in ACTIVATIONS or not _positively_homogeneous(act, consts):
            continue
        dq1 = producer.get(act.input[0])
        if dq1 is None or dq1.op_type != "DequantizeLinear" or only_consumer(dq1.output[0]) is not act:
            continue
        q1 = producer.get(dq1.input[0])
        if q1 is None or q1.op_type != "QuantizeLinear" or only_consumer(q1.output[0]) is not dq1:
            continue
        p = producer.get(q1.input[0])
        if p is None or p.op_type not in PRODUCERS or only_consumer(p.output[0]) is not q1:
            continue
        if not (_zero_point_is_zero(q1, consts) and _zero_point_is_zero(dq1, consts)):
            continue
        y, z = p.output[0], act.output[0]
        q2 = only_consumer(z)
        act.input[0] = y
        if q2 is not None and q2.op_type == "QuantizeLinear":
            removed.update((id(q1), id(dq1)))           # Act's output is quantized once, by Q2
            rep.pairs_removed += 1
        else:                                           # move the pair behind Act: Act -> Q1 -> DQ1 -> z
            fresh = f"{z}__prequant"
            act.output[0] = fresh
            q1.input[0] = fresh
            dq1.output[0] = z
        rep.moved += 1
    nodes = [n for n in g.node if id(n) not in removed]
    del g.node[:]
    g.node.extend(_toposort(nodes, {i.name for i in g.input} | {i.name for i in g.initializer}))
    rep.nodes_after = len(g.node)
    return m, rep


def _toposort(nodes: list[onnx.NodeProto], available: set[str]) -> list[onnx.NodeProto]:
    """Stable topological order (the rewrite moves an activation ahead of the pair that fed it)."""
    have = set(available) | {""}
    out: list[onnx.NodeProto] = []
    pending = list(nodes)
    while pending:
        rest = []
        for n in pending:
            if all(i in have for i in n.input):
                out.append(n)
                have.update(n.output)
            else:
                rest.append(n)
        if len(rest) == len(pending):   # inputs from outside (subgraph captures): keep the remaining order
            out.extend(rest)
            break
        pending = rest
    return out
