"""The optimizer stage: analyzed graph -> stripped, optimized graph (what the bundle ships as model.onnx).

Passes are small graph -> graph functions in packager/passes/, run in the order of PASSES on one onnx-ir
model; each is recorded with its node count before/after and the op-type counts it changed. Constant
folding is the analysis stage's (analyze.py, onnx.reference): it is reported first, and the optimized
graph is analyzed again at the end (new foldable values, fresh shapes). Epilogue fusion runs last, on
that re-analyzed graph, and groups kernels into model-local functions (passes/fuse_graph.py).
Lowering gets the same graph with those functions inlined (onnx.inliner)."""
from __future__ import annotations

import collections
import dataclasses
from typing import Callable

import onnx
import onnx.inliner
import onnx_ir as ir

from .analyze import Graph, analyze
from .passes.cleanup import eliminate_identity, remove_dead
from .passes.fold_batchnorm import fold_batchnorm
from .passes.fuse_graph import fuse_graph
from .passes.matmul_gemm import matmul_add_to_gemm
from .passes.reshape import collapse_reshapes
from .passes.strip import strip_proto, strip_training
from .passes.transpose import eliminate_transposes

# name, what it does (for the report), where the rewrite comes from, function (in place on the IR)
PASSES: list[tuple[str, str, Callable[[ir.Model], object]]] = [
    ("eliminate_identity", "onnx-ir IdentityEliminationPass; inference Dropout -> Identity (edgepack)",
     eliminate_identity),
    ("remove_dead", "onnx-ir RemoveUnusedNodesPass (dead nodes, unused initializers)", remove_dead),
    ("fold_batchnorm", "onnxscript fuse_batchnorm rules (Conv, ConvTranspose, Gemm) + inference-mode check",
     fold_batchnorm),
    ("matmul_add_to_gemm", "onnxscript matmul_add_to_gemm rules + 2-D / bias broadcast checks", matmul_add_to_gemm),
    ("eliminate_transposes", "onnxscript transpose_transpose / no_op_transpose rules; push through "
     "elementwise ops (edgepack)", eliminate_transposes),
    ("collapse_reshapes", "view-op chains -> one Reshape to the static shape (edgepack)", collapse_reshapes),
    ("remove_dead", "onnx-ir RemoveUnusedNodesPass", remove_dead),
]


@dataclasses.dataclass
class Optimized:
    graph: Graph                 # for lowering: functions inlined; graph.model is the model to ship
    reference: onnx.ModelProto   # the analyzed graph, training-only parts stripped: verification's reference
    report: list[dict]
    stripped: dict


def _ops(nodes) -> collections.Counter:
    return collections.Counter(n.op_type if not n.domain or n.domain == "ai.onnx" else f"{n.domain}.{n.op_type}"
                               for n in nodes)


def _record(name: str, source: str, before: collections.Counter, after: collections.Counter) -> dict:
    delta = {op: after[op] - before[op] for op in sorted(set(before) | set(after)) if after[op] != before[op]}
    return {"pass": name, "source": source, "nodes_before": sum(before.values()),
            "nodes_after": sum(after.values()), "changed": delta}


def optimize(graph: Graph, source_nodes: int, keep_metadata: bool = False, fuse: bool = True) -> Optimized:
    """Strip, run PASSES, re-analyze, fuse. `source_nodes`: the loaded model's node count (for the report)."""
    model = onnx.ModelProto()
    model.CopyFrom(graph.model)
    stripped = strip_proto(model, keep_metadata)
    dropouts = strip_training(model)
    if dropouts:
        stripped["training_dropout"] = dropouts
    reference = onnx.ModelProto()
    reference.CopyFrom(model)

    report = [{"pass": "fold_constants", "source": "edgepack analyze (onnx.reference, shape subgraphs included)",
               "nodes_before": source_nodes, "nodes_after": len(graph.nodes),
               "changed": {"folded": graph.folded} if graph.folded else {}}]
    m = ir.serde.deserialize_model(model)
    for name, source, fn in PASSES:
        before = _ops(m.graph)
        fn(m)
        report.append(_record(name, source, before, _ops(m.graph)))
    proto = ir.serde.serialize_model(m)
    before = _ops(proto.graph.node)
    g2 = analyze(proto)
    if g2.folded:
        report.append(_record("fold_constants", "edgepack analyze, again on the optimized graph", before,
                              _ops(g2.nodes)))
    ship = g2.model
    if fuse:
        before = _ops(ship.graph.node)
        fuse_graph(ship, g2.shapes, g2.consts, g2.opset)
        report.append(_record("fuse_epilogue", "edgepack: Conv/Gemm [+ residual Add] [+ activation] -> one "
                              "function call (the plan runs it as one kernel)", before, _ops(ship.graph.node)))
    stripped.update({k: v for k, v in strip_proto(ship, keep_metadata=True).items() if k not in stripped})
    lowered = analyze(onnx.inliner.inline_local_functions(ship)) if fuse else g2
    lowered = dataclasses.replace(lowered, model=ship, notices=graph.notices, folded=graph.folded + g2.folded)
    return Optimized(lowered, reference, report, stripped)


def summary(report: list[dict]) -> list[str]:
    """One line per pass that changed the graph (for stderr and `package inspect`)."""
    lines = []
    for r in report:
        if r["changed"]:
            what = ", ".join(f"{k} {v:+d}" if k != "folded" else f"{v} folded" for k, v in r["changed"].items())
            lines.append(f"{r['pass']}: {r['nodes_before']} -> {r['nodes_after']} nodes ({what})")
    return lines
