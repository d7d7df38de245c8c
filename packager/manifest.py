"""The write stage's manifest.json: what the bundle is (name, target, I/O with dtypes and shapes, plan figures,
notices, profile, precision, the optimizer's report, run-time dims). docs/bundle-format.md."""
from __future__ import annotations

import datetime

import onnx

from . import __version__
from .analyze import Graph
from .bundle import FORMAT, FORMAT_VERSION, WASM_VARIANTS, dtype_name
from .lowering.context import LoweredPlan
from .plan.opcodes import Op


def build_manifest(name: str, target: str, source: onnx.ModelProto, graph: Graph, lowered: LoweredPlan,
                   notices: list[str], profile: str, precision: dict, optimization=None, syms=None,
                   io_dims: dict[str, list] | None = None) -> dict:
    """The manifest before the bundle's files are listed (packager/bundle.py adds them with their SHA-256)."""
    plan = lowered.plan

    def dims(n: str, t: int) -> list:
        # a dim of -1 in a plan of fixed inputs: an If output whose branch sets it when it runs
        return io_dims[n] if io_dims else [d if d >= 0 else f"{n}_dim{k}" for k, d in enumerate(plan.tensors[t].dims)]

    def io(names: list[str], plan_ids: list[int]) -> list[dict]:
        return [{"name": n, "dtype": dtype_name(plan.tensors[t].dtype), "shape": dims(n, t), "tensor": t}
                for n, t in zip(names, plan_ids)]

    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "target": target,
        "name": name, "created_by": f"edgepack {__version__}",
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "source": {"opset": graph.opset, "producer": f"{source.producer_name} {source.producer_version}".strip(),
                   "nodes": len(source.graph.node)},
        "inputs": io(graph.inputs, plan.inputs),
        "outputs": io(graph.outputs, plan.outputs),
        "plan": {"version": plan.version, "nodes": len(plan.nodes), "tensors": len(plan.tensors),
                 "arena_bytes": plan.arena_bytes, "intermediates_bytes": lowered.intermediates_bytes,
                 "weights_bytes": len(plan.weights), "folded_nodes": graph.folded},
        "runtime": {v: f for v, f in WASM_VARIANTS.items()},
        "notices": notices,
        "profile": {"name": profile},
        "precision": precision,
    }
    if optimization is not None:
        manifest.update(optimizations=optimization.report, stripped=optimization.stripped)
    if syms is not None:   # docs/plan-format.md, "Version 2"
        manifest["dims"] = {s: {"min": syms.lo(s), "max": syms.hi(s), "example": syms.example[s]} for s in syms.names()}
        # resolving can fail at a node (an input shape the model does not allow): runtimes name its ONNX node
        manifest["plan"]["node_sources"] = [f"{Op(n.op).name} ({src})" for n, src in zip(plan.nodes, lowered.node_sources)]
        if plan.dynamic.max_arena_bytes:
            manifest["plan"].update(max_arena_bytes=plan.dynamic.max_arena_bytes,
                                    max_memory_bytes=lowered.report["max_memory_bytes"])
    if profile == "strict":
        manifest["profile"]["execution_order"] = [
            {"kernel": Op(n.op).name, "onnx_node": src} for n, src in zip(plan.nodes, lowered.node_sources)]
    return manifest
