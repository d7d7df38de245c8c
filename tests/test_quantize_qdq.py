"""Fusion-aware QDQ placement (packager/quantize/qdq_placement.py): node counts before/after, and the
rewritten graph computes the same values as onnxruntime's placement (ONNX QDQ semantics: onnxruntime with
graph optimizations off, so each Q/DQ rounds exactly as the graph says)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager.analyze import analyze
from packager.model_load import load_model
from packager.quantize import quantize_step
from packager.quantize.calib_data import CalibrationSet
from packager.quantize.ort_quant import quantize_int8_static
from packager.quantize.qdq_placement import fusion_aware_placement

MODELS = Path(__file__).resolve().parent.parent / ".cache" / "models"


def _session(m: onnx.ModelProto) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    mm = onnx.ModelProto()
    mm.CopyFrom(m)
    mm.ir_version = min(mm.ir_version, 10)
    return ort.InferenceSession(mm.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _rand(shape, n, seed):
    return np.random.default_rng(seed).standard_normal((n, *shape)).astype(np.float32)


def _quantized(model: onnx.ModelProto, name: str, shape, n: int = 16) -> onnx.ModelProto:
    return quantize_int8_static(model, CalibrationSet({name: _rand(shape, n, 1)}, None, "random"))


def _act_inputs_from(model: onnx.ModelProto, acts=("Relu", "Clip", "LeakyRelu")) -> Counter:
    producer = {o: n.op_type for n in model.graph.node for o in n.output}
    return Counter(producer.get(n.input[0], "input") for n in model.graph.node if n.op_type in acts)


def test_cifar10net_relu_pairs_removed_and_values_identical():
    g = analyze(load_model(MODELS / "cifar10net.onnx", frozenset()))
    q = _quantized(g.model, "image", g.shapes["image"])
    f, rep = fusion_aware_placement(q)
    before, after = Counter(n.op_type for n in q.graph.node), Counter(n.op_type for n in f.graph.node)
    # 5 Conv+Relu and 1 Gemm+Relu: each loses its Q/DQ pair between producer and activation
    assert (rep.moved, rep.pairs_removed) == (6, 6)
    assert after["QuantizeLinear"] == before["QuantizeLinear"] - 6
    assert after["DequantizeLinear"] == before["DequantizeLinear"] - 6
    assert after["Relu"] == before["Relu"] == 6 and after["Conv"] == before["Conv"]
    assert rep.nodes_before - rep.nodes_after == 12 == len(q.graph.node) - len(f.graph.node)
    assert _act_inputs_from(q) == {"DequantizeLinear": 6}
    assert _act_inputs_from(f) == {"Conv": 5, "Gemm": 1}
    onnx.checker.check_model(f)
    sq, sf = _session(q), _session(f)
    for x in _rand(g.shapes["image"], 8, 2):
        a, b = sq.run(None, {"image": x})[0], sf.run(None, {"image": x})[0]
        assert np.array_equal(a, b)     # Relu with zero point 0: exact


def _toy(act: str, follow: bool) -> onnx.ModelProto:
    """x -> Conv -> act [-> Conv] -> y."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "w1"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32) * 0.1, "b1"),
             numpy_helper.from_array(rng.standard_normal((4, 8, 1, 1)).astype(np.float32) * 0.3, "w2"),
             numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(1.5, np.float32), "hi")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1")]
    a_out = "a" if follow else "y"
    if act == "Clip":
        nodes.append(helper.make_node("Clip", ["c1", "lo", "hi"], [a_out], name="act"))
    elif act == "LeakyRelu":
        nodes.append(helper.make_node("LeakyRelu", ["c1"], [a_out], alpha=0.1, name="act"))
    else:
        nodes.append(helper.make_node(act, ["c1"], [a_out], name="act"))
    if follow:
        nodes.append(helper.make_node("Conv", ["a", "w2"], ["y"], name="conv2"))
    shape = [1, 4 if follow else 8, 6, 6]
    used = {i for n in nodes for i in n.input}
    g = helper.make_graph(nodes, "toy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                          [i for i in inits if i.name in used])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("act", ["Relu", "Clip", "LeakyRelu"])
@pytest.mark.parametrize("follow", [True, False], ids=["quantized-consumer", "graph-output"])
def test_toy_graphs(act, follow):
    m = _toy(act, follow)
    q = _quantized(m, "x", (1, 3, 6, 6), 32)
    f, rep = fusion_aware_placement(q)
    assert rep.moved == 1
    assert _act_inputs_from(f) == {"Conv": 1}
    sq, sf = _session(q), _session(f)
    scales = {i.name: float(numpy_helper.to_array(i)) for i in q.graph.initializer
              if i.name.endswith("scale") and numpy_helper.to_array(i).size == 1}
    # the scale the activation's output is quantized with (last Q before y or before conv2)
    step = max(scales.values())
    worst = 0.0
    for x in _rand((1, 3, 6, 6), 16, 3):
        a, b = sq.run(None, {"x": x})[0], sf.run(None, {"x": x})[0]
        if act == "Relu" or (act == "Clip" and follow):
            assert np.array_equal(a, b), act     # exact (same scale on both sides for Clip)
        worst = max(worst, float(np.abs(a - b).max()))
    # otherwise: one rounding instead of two, at most one quantization step (times conv2's gain) apart
    assert worst <= step * (4 if follow else 1) + 1e-6, (act, worst, step)


def test_naive_placement_keeps_onnxruntime_graph():
    g = analyze(load_model(MODELS / "cifar10net.onnx", frozenset()))
    data = {"image": _rand(g.shapes["image"], 10, 1)}
    naive = quantize_step(g, "web", "int8", data, placement="naive")
    fused = quantize_step(g, "web", "int8", data, placement="fusion-aware")
    assert naive.info["qdq_placement"] == {"mode": "naive"}
    assert fused.info["qdq_placement"]["qdq_pairs_removed"] == 6
    assert _act_inputs_from(naive.graph.model) == {"DequantizeLinear": 6}
    assert _act_inputs_from(fused.graph.model) == {"Conv": 5, "Gemm": 1}
