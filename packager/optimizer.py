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

from . import weights
from .analyze import Graph, analyze
from .passes.cleanup import eliminate_identity, remove_dead
from .passes.contrib import rewrite_contrib
from .passes.expand_functions import expand_functions
from .passes.fold_batchnorm import fold_batchnorm
from .passes.fuse_graph import fuse_graph
from .passes.matmul_gemm import matmul_add_to_gemm
from .passes.reshape import collapse_reshapes
from .passes.scale import hoist_matmul_scale
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
    ("hoist_matmul_scale", "a scalar Mul/Div after a MatMul onto its smaller or constant operand (edgepack)",
     hoist_matmul_scale),
    ("eliminate_transposes", "onnxscript transpose_transpose / no_op_transpose rules; push through "
     "elementwise ops (edgepack)", eliminate_transposes),
    ("collapse_reshapes", "view-op chains -> one Reshape to the static shape (edgepack)", collapse_reshapes),
    ("remove_dead", "onnx-ir RemoveUnusedNodesPass", remove_dead),
]
# A pass that can change nothing without one of these ops in the graph is not run (its record is the same): the
# rewrite rules try every node, which on a graph of 200,000 nodes costs more than the rest of packaging.
NEEDS: dict[str, frozenset[str]] = {
    "eliminate_identity": frozenset({"Identity", "Dropout"}),
    "fold_batchnorm": frozenset({"BatchNormalization"}),
    "matmul_add_to_gemm": frozenset({"MatMul"}),
    "hoist_matmul_scale": frozenset({"MatMul"}),
    "eliminate_transposes": frozenset({"Transpose"}),
    "collapse_reshapes": frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"}),
}


def canonicalize(model: onnx.ModelProto, bound: frozenset[str] | None = None) -> tuple[onnx.ModelProto, list[str]]:
    """Before analysis: onnxruntime's contrib ops rewritten into standard ONNX (passes/contrib.py), then standard
    ops without a lowering replaced by their ONNX function bodies (passes/expand_functions.py), so shape
    inference, folding and lowering see standard ops only. bound: graph inputs given as constants (--const); None
    for a static plan (passes/expand_functions.RUN_TIME_BODIES).
    Returns the model and one notice per rewrite."""
    model, contrib = rewrite_contrib(model)
    model, expanded = expand_functions(model, bound)
    notices = [f"{n} com.microsoft.{op} node(s) rewritten into standard ONNX ops" for op, n in contrib.items()]
    notices += [f"{n} {op} node(s) expanded into their ONNX function body" for op, n in expanded.items()]
    return model, notices


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


def optimize(graph: Graph, source_nodes: int, keep_metadata: bool = False) -> Optimized:
    """Strip, run PASSES, re-analyze, fuse. `source_nodes`: the loaded model's node count (for the report)."""
    model = onnx.ModelProto()
    model.CopyFrom(graph.model)
    stripped = strip_proto(model, keep_metadata)
    dropouts = strip_training(model)
    if dropouts:
        stripped["training_dropout"] = dropouts
        graph = dataclasses.replace(graph, notices=graph.notices + [
            f"Dropout '{d}' in training mode stripped: the bundle computes inference (identity)" for d in dropouts])
    reference = onnx.ModelProto()
    reference.CopyFrom(model)

    report = [{"pass": "fold_constants", "source": "edgepack analyze (onnx.reference, shape subgraphs included)",
               "nodes_before": source_nodes, "nodes_after": len(graph.nodes),
               "changed": {"folded": graph.folded} if graph.folded else {}}]
    bound = {n: graph.shapes[n] for n in graph.inputs}   # re-analysis keeps the bound (possibly 0-sized) shapes
    skipped: dict[int, str] = {}
    while True:   # a pass that raises is skipped and the passes rerun from the start without it
        try:
            records, g2 = _run_passes(model, skipped, bound, graph)
            break
        except _PassError as e:
            skipped[e.index] = e.why
        except Exception as e:  # noqa: BLE001 - even the IR round trip fails: ship the analyzed graph as is
            report.append({"pass": "optimizer", "source": "onnx-ir", "skipped": _why(e)})
            return Optimized(graph, graph.model, report, {})
    report += records
    ship = g2.model
    lowered = g2
    before = _ops(ship.graph.node)
    try:
        fused = onnx.ModelProto()
        fused.CopyFrom(ship)
        if fuse_graph(fused, g2.shapes, g2.consts, g2.opset):
            lowered, ship = analyze(onnx.inliner.inline_local_functions(fused), bound, keep=graph.keep,
                                    dynamic=graph.dynamic, value_dim=graph.value_dim), fused
        report.append(_record("fuse_epilogue", FUSE_SOURCE, before, _ops(ship.graph.node)))
    except Exception as e:  # noqa: BLE001 - an optimization, never a reason to refuse a model
        report.append({"pass": "fuse_epilogue", "source": FUSE_SOURCE, "skipped": _why(e)})
    stripped.update({k: v for k, v in strip_proto(ship, keep_metadata=True).items() if k not in stripped})
    lowered = dataclasses.replace(lowered, model=ship, notices=graph.notices, folded=graph.folded + g2.folded,
                                  source_opset=graph.source_opset)   # errors name the model's own opset
    return Optimized(lowered, reference, report, stripped)


FUSE_SOURCE = "edgepack: Conv/Gemm [+ residual Add] [+ activation] -> one function call (one kernel in the plan)"


class _PassError(Exception):
    def __init__(self, index: int, why: str) -> None:
        super().__init__(why)
        self.index, self.why = index, why


def _why(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


# Passes that write the bound input shapes into the graph: not for a plan whose shapes are resolved at run time.
STATIC_ONLY = {"collapse_reshapes"}


def _run_passes(model: onnx.ModelProto, skipped: dict[int, str], bound: dict, graph: Graph) -> tuple[list[dict], Graph]:
    """PASSES (but `skipped`) on an IR copy of `model`, then analysis of the result."""
    m = ir.serde.deserialize_model(model)
    weights.ir_open(m)   # passes read the stored weights themselves
    records = []
    for i, (name, source, fn) in enumerate(PASSES):
        if i in skipped or (graph.dynamic and name in STATIC_ONLY):
            records.append({"pass": name, "source": source,
                            "skipped": skipped.get(i, "shapes are resolved at run time")})
            continue
        before = _ops(m.graph)
        if name in NEEDS and not NEEDS[name] & before.keys():
            records.append(_record(name, source, before, before))
            continue
        try:
            fn(m)
        except Exception as e:  # noqa: BLE001 - a library pass failing on an unusual graph
            raise _PassError(i, _why(e)) from e
        records.append(_record(name, source, before, _ops(m.graph)))
    weights.ir_close(m)
    proto = ir.serde.serialize_model(m)
    before = _ops(proto.graph.node)
    try:
        g2 = analyze(proto, bound, keep=graph.keep, dynamic=graph.dynamic, value_dim=graph.value_dim)
    except Exception as e:  # noqa: BLE001 - blame the last pass that changed the graph
        changed = [i for i, r in enumerate(records) if r.get("changed") and "skipped" not in r]
        if not changed:
            raise
        raise _PassError(changed[-1], f"the graph it produced does not analyze: {_why(e)}") from e
    if g2.folded:
        records.append(_record("fold_constants", "edgepack analyze, again on the optimized graph", before,
                               _ops(g2.nodes)))
    return records, g2


def summary(report: list[dict], stripped: dict | None = None) -> list[str]:
    """One line per pass that changed the graph or was skipped, and per kind of thing stripped
    (for stderr and `package inspect`)."""
    lines = []
    for r in report:
        if r.get("skipped"):
            lines.append(f"{r['pass']}: skipped ({r['skipped']})")
        elif r.get("changed"):
            what = ", ".join(f"{k} {v:+d}" if k != "folded" else f"{v} folded" for k, v in r["changed"].items())
            lines.append(f"{r['pass']}: {r['nodes_before']} -> {r['nodes_after']} nodes ({what})")
    for k, v in (stripped or {}).items():
        lines.append(f"stripped {k}: {', '.join(v) if isinstance(v, list) else v}")
    return lines
