"""8-bit elementwise regions of a QDQ graph as one table lookup (QLUT).

A region reads one 8-bit tensor x through DequantizeLinear nodes, applies elementwise float ops (Sigmoid, Mul,
Clip, ..., scalar constants only) and intermediate Q/DQ pairs, and ends in one QuantizeLinear: its output byte is a
function of the input byte alone. onnxruntime's SiLU export is one: `DQ(x) -> Sigmoid -> Q -> DQ; Mul(DQ(x), ·) -> Q`
(EfficientNet, YOLO), and its GELU `Div -> Erf -> Q -> DQ -> Add -> Q -> DQ -> Mul -> Q -> DQ -> Mul -> Q` (transformers). Such a region runs as QLUT with a 256-entry table that onnxruntime itself computes at package
time, on the region's own nodes, for every byte value: the reference's own arithmetic, byte for byte.

Regions are claimed from the last QuantizeLinear backwards, so the largest one wins (a SiLU's inner Sigmoid -> Q
is part of the SiLU). Every node of a region but its final Q must be read only inside it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
from onnx import helper

from ..analyze import Graph

# Elementwise ONNX ops (one float32 output per element, no axis or shape attributes).
ELEMENTWISE = frozenset({
    "Abs", "Add", "Ceil", "Celu", "Clip", "Cos", "Div", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish",
    "Identity", "LeakyRelu", "Log", "Max", "Min", "Mish", "Mul", "Neg", "Pow", "PRelu", "Reciprocal", "Relu", "Round",
    "Selu", "Sigmoid", "Sign", "Sin", "Softplus", "Softsign", "Sqrt", "Sub", "Tanh", "ThresholdedRelu"})
FLOAT = onnx.TensorProto.FLOAT
BYTES = (onnx.TensorProto.UINT8, onnx.TensorProto.INT8)


@dataclass
class LutRegion:
    x: str                       # the 8-bit tensor read
    out: str                     # the final QuantizeLinear's output
    members: list                # the region's nodes without its leaf DQs (removed when nothing else reads them)
    leaves: list                 # the DequantizeLinear nodes of x the region reads


def find_regions(nodes: list, graph: Graph, producers: dict, consumers: dict,
                 scalar_q: Callable[[onnx.NodeProto], bool]) -> list[LutRegion]:
    """The maximal QLUT regions among `nodes`, disjoint. scalar_q(node): a Q or DQ node with constant per-tensor
    parameters and an 8-bit quantized side."""
    graph_out = set(graph.outputs)

    def shape(v: str):
        return graph.shapes.get(v)

    def grow(v: str, base, members: list, leaves: dict) -> bool:
        """Add the producers of float value v down to DQ leaves; False when v is not elementwise in one byte."""
        p = producers.get(v)
        if not isinstance(p, onnx.NodeProto) or p.domain not in ("", "ai.onnx") or shape(v) != base:
            return False
        if any(p is m for m in members) or id(p) in leaves:
            return True
        if p.op_type == "DequantizeLinear":
            if not scalar_q(p) or p.input[0] in graph.consts:
                return False
            leaves[id(p)] = p
            return True
        if p.op_type not in ELEMENTWISE or len(p.output) != 1 or graph.dtypes.get(v) != FLOAT:
            return False
        members.append(p)
        for i in p.input:
            if not i:
                continue
            c = graph.consts.get(i)
            if c is not None:
                if np.asarray(c).size != 1:
                    return False
            elif not grow(i, base, members, leaves):
                return False
        return True

    def closed(members: list) -> bool:
        """Only the final Q's output (members[0]) is read outside the region."""
        ids = {id(m) for m in members}
        return not any(o in graph_out or any(id(c) not in ids for c in consumers.get(o, []))
                       for m in members[1:] for o in m.output)

    def absorb(members: list, leaves: dict, base) -> tuple[list, dict] | None:
        """The largest closed region with one 8-bit source from here, absorbing intermediate Q/DQ pairs whose Q
        reads an elementwise op (a SiLU's Sigmoid -> Q; each step of onnxruntime's GELU export); None if none."""
        here = (members, leaves) if len({d.input[0] for d in leaves.values()}) == 1 and closed(members) else None
        for k, d in leaves.items():
            pq = producers.get(d.input[0])
            if not (isinstance(pq, onnx.NodeProto) and pq.op_type == "QuantizeLinear" and scalar_q(pq)
                    and isinstance(producers.get(pq.input[0]), onnx.NodeProto)
                    and producers[pq.input[0]].op_type in ELEMENTWISE):
                continue
            m2, l2 = [*members, d, pq], {i: v for i, v in leaves.items() if i != k}
            deeper = absorb(m2, l2, base) if grow(pq.input[0], base, m2, l2) else None
            return deeper or here   # the first absorbable leaf only: a path, not a search
        return here

    def region_at(q: onnx.NodeProto) -> LutRegion | None:
        if not scalar_q(q) or graph.dtypes.get(q.output[0]) not in BYTES:
            return None
        base = shape(q.input[0])
        if base is None or shape(q.output[0]) != base:
            return None
        members, leaves = [q], {}
        if not grow(q.input[0], base, members, leaves):
            return None
        found = absorb(members, leaves, base)
        if found is None:
            return None
        members, leaves = found
        x = next(iter(leaves.values())).input[0]
        if graph.dtypes.get(x) not in BYTES:
            return None
        return LutRegion(x, q.output[0], members, list(leaves.values()))

    regions, claimed = [], set()
    for n in reversed(nodes):
        if isinstance(n, onnx.NodeProto) and n.op_type == "QuantizeLinear" and id(n) not in claimed:
            r = region_at(n)
            if r is not None and not any(id(m) in claimed for m in r.members):
                claimed.update(id(m) for m in r.members)
                regions.append(r)
    return regions[::-1]


def tables(regions: list[LutRegion], graph: Graph) -> list[np.ndarray]:
    """Each region's 256 output bytes, indexed by the input's unsigned byte: one onnxruntime run (unoptimized, in
    a child process) of all the regions' nodes on every byte value."""
    from ..ort_isolated import run_isolated
    from ..reference import ort_model
    seen, nodes, consts = set(), [], {}
    for r in regions:
        for m in [*r.leaves, *reversed(r.members)]:
            if id(m) not in seen:
                seen.add(id(m))
                nodes.append(m)
                consts.update({i: graph.consts[i] for i in m.input if i in graph.consts})
    # topological order: the regions' nodes as the graph lists them
    order = {id(n): k for k, n in enumerate(graph.nodes)}
    nodes.sort(key=lambda n: order.get(id(n), 0))
    xs = sorted({r.x for r in regions})
    feeds = {x: np.arange(256, dtype=np.uint8).view(np.int8 if graph.dtypes[x] == onnx.TensorProto.INT8 else np.uint8)
             for x in xs}
    g = helper.make_graph(
        nodes, "qlut", [helper.make_tensor_value_info(x, graph.dtypes[x], [256]) for x in xs],
        [helper.make_tensor_value_info(r.out, graph.dtypes[r.out], [256]) for r in regions],
        [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    m = ort_model(helper.make_model(g, opset_imports=list(graph.model.opset_import)))
    out = run_isolated(m, feeds, [r.out for r in regions], optimize=False)
    return [np.ascontiguousarray(out[r.out]).reshape(256) for r in regions]
