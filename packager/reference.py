"""What every stage compares against: seeded inputs, onnxruntime's answer on them, and the difference.
Shared by packaging (verification), quantization (the accuracy report), the edge target, the CLI and the
benchmarks; it imports no stage, so no stage imports the pipeline (packager/api.py) back."""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx

from .errors import PackagerError

Runner = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]

ORT_MAX_IR = 10
ORT_MAX_OPSET = 26   # onnxruntime 1.31 refuses models stamped with an opset still under development


def random_inputs(specs: list[dict], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for verification: normal floats; small non-negative ints (valid as indices)."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in specs:
        dt = np.dtype(s["dtype"])
        if dt.kind == "f":
            out[s["name"]] = rng.standard_normal(s["shape"]).astype(dt)
        elif dt.kind == "b":
            out[s["name"]] = rng.integers(0, 2, s["shape"]).astype(dt)
        else:
            out[s["name"]] = rng.integers(0, 8, s["shape"]).astype(dt)
    return out


QDQ_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}


def reference_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], isolated: bool = False) -> dict[str, np.ndarray]:
    """onnxruntime CPU (float32 reference, all optimizations) on the same feeds. A QDQ model runs with graph
    optimizations off: its Q/DQ nodes then execute as written, where the fused int8 kernels onnxruntime
    would substitute saturate int16 pair sums on x86 CPUs without VNNI (docs/quantization.md).
    isolated: in a child process (packager/ort_isolated.py), as packaging does: a model that crashes
    onnxruntime raises OrtFailure instead of ending this process."""
    if isolated:
        from .ort_isolated import run_isolated
        return run_isolated(ort_model(model), feeds, optimize=not any(n.op_type in QDQ_OPS for n in model.graph.node))
    return reference_session(model)(feeds)


def reference_session(model: onnx.ModelProto) -> Runner:
    """onnxruntime CPU, one session for every sample. QDQ models run with graph optimizations off, as in
    reference_run: their Q/DQ nodes execute as written (exact QDQ semantics)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    if any(n.op_type in QDQ_OPS for n in model.graph.node):
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    from .weights import inline
    sess = ort.InferenceSession(inline(ort_model(model)).SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return lambda feeds: dict(zip(names, sess.run(names, feeds)))


def compare(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> dict:
    worst_abs, worst_rel = 0.0, 0.0
    for k, w in want.items():
        g = got[k]
        if g.shape != w.shape:
            raise PackagerError(f"verification: output '{k}' has shape {g.shape}, the reference gives {w.shape}")
        if w.size:
            d = np.abs(g.astype(np.float64) - w.astype(np.float64))
            worst_abs = max(worst_abs, float(np.nanmax(d)))
            worst_rel = max(worst_rel, float(np.nanmax(d / (np.abs(w.astype(np.float64)) + 1e-6))))
    return {"max_abs_diff": worst_abs, "max_rel_diff": worst_rel}


def _nodes(graph: onnx.GraphProto):
    """Every node of graph and of its subgraphs (If / Loop / Scan bodies)."""
    for n in graph.node:
        yield n
        for a in n.attribute:
            for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
                yield from _nodes(g)


def _same_ops_at(graph: onnx.GraphProto, opset: int, older: int) -> bool:
    """Whether every default-domain op of graph means at opset `older` what it means at `opset` (same schema)."""
    for n in _nodes(graph):
        if n.domain not in ("", "ai.onnx"):
            continue
        try:
            if onnx.defs.get_schema(n.op_type, opset, "").since_version != \
                    onnx.defs.get_schema(n.op_type, older, "").since_version:
                return False
        except onnx.defs.SchemaError:
            return False
    return True


def ort_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy onnxruntime loads: onnx writes newer IR versions than onnxruntime reads, and opsets newer than it
    accepts (an opset under development): restamped to ORT_MAX_OPSET when every op is unchanged since then."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.ir_version = min(m.ir_version, ORT_MAX_IR)
    for imp in m.opset_import:
        if imp.domain in ("", "ai.onnx") and imp.version > ORT_MAX_OPSET and \
                _same_ops_at(m.graph, imp.version, ORT_MAX_OPSET):
            imp.version = ORT_MAX_OPSET
    return m
