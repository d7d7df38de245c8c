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


def random_inputs(specs: list[dict], seed: int = 0, ranges: dict[str, tuple[int, int]] | None = None
                  ) -> dict[str, np.ndarray]:
    """Seeded inputs for verification: normal floats; small non-negative ints (valid as indices), or within
    ranges[name] = (low, high exclusive) where the model shows what an input holds (input_ranges)."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in specs:
        dt = np.dtype(s["dtype"])
        if dt.kind == "f":
            out[s["name"]] = rng.standard_normal(s["shape"]).astype(dt)
        elif dt.kind == "b":
            out[s["name"]] = rng.integers(0, 2, s["shape"]).astype(dt)
        else:
            low, high = (ranges or {}).get(s["name"], (0, 8))
            out[s["name"]] = rng.integers(low, high, s["shape"]).astype(dt)
    return out


def verification_feeds(model: onnx.ModelProto, specs: list[dict]) -> tuple[dict[str, np.ndarray], dict[str, list[int]]]:
    """Verification's seeded inputs, integer ones within the ranges the graph shows (input_ranges), and those
    ranges as the manifest records them (empty when there are none)."""
    ranges = input_ranges(model)
    return random_inputs(specs, ranges=ranges), {k: list(v) for k, v in ranges.items()}


# Ops that pass an integer input's values on unchanged (an index or a mask reshaped, cast or broadcast).
_SAME_VALUES = {"Cast", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Expand", "Identity"}
_FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}


def _axis(n: onnx.NodeProto, rank: int) -> int:
    a = next((a.i for a in n.attribute if a.name == "axis"), 0)
    return a + rank if a < 0 else a


def input_ranges(model: onnx.ModelProto) -> dict[str, tuple[int, int]]:
    """Integer inputs whose values the graph shows, as (low, high exclusive): indices into a Gather's constant table
    (token, position, segment ids): in range of the table; a mask, cast to a float and subtracted from 1 (the
    additive attention mask (1 - mask) * lowest) or named like one: 0 / 1. Random values outside these make
    both runtimes read nothing meaningful (an out-of-range index, (1 - 5) * lowest overflowing to -inf)."""
    from .weights import to_array
    g = model.graph
    tensors = {t.name: t for t in g.initializer}
    tensors.update((n.output[0], n.attribute[0].t) for n in g.node if n.op_type == "Constant" and n.attribute and
                   n.attribute[0].type == onnx.AttributeProto.TENSOR)
    consts = {k: tuple(t.dims) for k, t in tensors.items()}
    ones = {k for k, t in tensors.items()
            if t.data_type in _FLOATS and int(np.prod(t.dims)) == 1 and to_array(t).reshape(-1)[0] == 1}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for n in g.node:
        for x in n.input:
            readers.setdefault(x, []).append(n)
    inits = {t.name for t in g.initializer}
    out: dict[str, tuple[int, int]] = {}
    for vi in g.input:
        if vi.name in inits or vi.type.tensor_type.elem_type in (*_FLOATS, onnx.TensorProto.BOOL):
            continue
        same, floated, todo = {vi.name}, set(), [vi.name]
        while todo:   # the values this input's values reach unchanged (floated: once cast to a float)
            x = todo.pop()
            for n in readers.get(x, []):
                if n.op_type in _SAME_VALUES and n.input[0] == x and n.output[0] not in same:
                    same.add(n.output[0])
                    todo.append(n.output[0])
                    if x in floated or (n.op_type == "Cast" and
                                        any(a.name == "to" and a.i in _FLOATS for a in n.attribute)):
                        floated.add(n.output[0])
        sizes = [consts[n.input[0]][_axis(n, len(consts[n.input[0]]))] for x in same for n in readers.get(x, [])
                 if n.op_type == "Gather" and n.input[1] == x and consts.get(n.input[0])]
        masked = any(n.op_type == "Sub" and n.input[0] in ones and n.input[1] == x
                     for x in floated for n in readers.get(x, []))
        if sizes:
            out[vi.name] = (0, min(sizes))
        elif masked or "mask" in vi.name.lower():
            out[vi.name] = (0, 2)
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
    """The worst absolute and relative difference; NaN against a number, or an infinity against anything else,
    counts as an infinite difference. finite_values: how many elements were finite on both sides (none: the
    comparison says nothing, e.g. both runtimes overflowed to NaN on these inputs)."""
    worst_abs, worst_rel, finite = 0.0, 0.0, 0
    for k, w in want.items():
        g = got[k]
        if g.shape != w.shape:
            raise PackagerError(f"verification: output '{k}' has shape {g.shape}, the reference gives {w.shape}")
        if w.size:
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            with np.errstate(invalid="ignore"):
                d = np.abs(g64 - w64)
                same = (np.isnan(g64) & np.isnan(w64)) | (np.isinf(w64) & (g64 == w64))
                d = np.where(same, 0.0, np.where(np.isnan(d), np.inf, d))
                rel = np.where(d == 0, 0.0, np.nan_to_num(d / (np.abs(w64) + 1e-6), nan=np.inf))
            worst_abs = max(worst_abs, float(d.max()))
            worst_rel = max(worst_rel, float(rel.max()))
            finite += int(np.count_nonzero(np.isfinite(g64) & np.isfinite(w64)))
    return {"max_abs_diff": worst_abs, "max_rel_diff": worst_rel, "finite_values": finite}


def check_finite(result: dict, log: Callable[[str], None], strict: bool = False) -> None:
    """A comparison that compared no finite value says nothing: an error under --profile strict, else a warning."""
    if result.get("finite_values", 1):
        return
    msg = ("verification compared no finite value: every output is NaN or infinite on both sides for these inputs, "
           "so its difference says nothing (an input whose values the graph does not show, e.g. a mask or index "
           "outside its range): compare with onnxruntime on your own inputs (`package run`)")
    if strict:
        raise PackagerError(msg)
    log(f"warning: {msg}")


def _same_ops_at(graph: onnx.GraphProto, opset: int, older: int) -> bool:
    """Whether every default-domain op of graph means at opset `older` what it means at `opset` (same schema)."""
    from .passes.subgraphs import all_nodes
    for n in all_nodes(graph):
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
