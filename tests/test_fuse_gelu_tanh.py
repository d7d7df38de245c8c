"""GPT-2's tanh GELU written out as eight nodes (packager/passes/gelu_tanh.py): one GELU_TANH, fused into the MatMul's
epilogue when it follows it, one UNARY after a Reshape (GPT-2's Conv1D); bundles on every wasm build against
onnxruntime; a chain with another constant is left alone."""
from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from packager import load_bundle, package
from packager.plan import layout
from packager.plan.opcodes import Op
from packager.plan.opspec import ACT_GELU_TANH, UnaryFn
from packager.reference import reference_run

from .conftest import f32, make_model

TOL = 1e-4


def _model(grouping: str, reshape: bool, cube: float = 0.044715) -> onnx.ModelProto:
    """x [1, 7, 8] -> MatMul + bias [-> Reshape] -> tanh GELU as nodes -> MatMul."""
    rng = np.random.default_rng(4)
    c = lambda name, v: numpy_helper.from_array(np.asarray(v, np.float32), name)  # noqa: E731
    inits = [c("w1", rng.standard_normal((8, 24)) * 0.5), c("b1", rng.standard_normal(24)), c("w2", rng.standard_normal((24, 5))),
             c("half", 0.5), c("three", 3.0), c("k", cube), c("s2pi", math.sqrt(2 / math.pi)), c("one", 1.0),
             numpy_helper.from_array(np.array([7, 24], np.int64), "shape")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h1"])]
    x = "h1"
    if reshape:
        nodes.append(helper.make_node("Reshape", ["h1", "shape"], ["h"]))
        x = "h"
    nodes += [helper.make_node("Pow", [x, "three"], ["p"]), helper.make_node("Mul", ["k", "p"], ["q"]),
              helper.make_node("Add", [x, "q"], ["r"]), helper.make_node("Mul", ["r", "s2pi"], ["s"]),
              helper.make_node("Tanh", ["s"], ["t"]), helper.make_node("Add", ["t", "one"], ["u"])]
    if grouping == "a":   # (0.5 * x) * (1 + tanh)
        nodes += [helper.make_node("Mul", [x, "half"], ["a"]), helper.make_node("Mul", ["a", "u"], ["g"])]
    else:                 # (x * (1 + tanh)) * 0.5
        nodes += [helper.make_node("Mul", ["u", x], ["m"]), helper.make_node("Mul", ["m", "half"], ["g"])]
    nodes.append(helper.make_node("MatMul", ["g", "w2"], ["y"]))
    return make_model(nodes, [f32("x", [1, 7, 8])], [f32("y", [7, 5] if reshape else [1, 7, 5])], inits)


@pytest.mark.parametrize("grouping", ["a", "b"])
@pytest.mark.parametrize("reshape", [False, True])
def test_gelu_tanh_chain_is_one_kernel(grouping: str, reshape: bool, tmp_path) -> None:
    m = _model(grouping, reshape)
    path = package(m, target="web", out=tmp_path / "b")   # verify: the bundle against onnxruntime
    nodes = layout.decode((path / "model.plan").read_bytes()).nodes
    kinds = [Op(n.op).name for n in nodes]
    if reshape:   # the Reshape between keeps the MatMul's epilogue out of reach: one UNARY
        assert kinds == ["MATMUL", "UNARY", "MATMUL"] and nodes[1].params == [UnaryFn.GELU_TANH]
    else:
        assert kinds == ["MATMUL", "MATMUL"] and nodes[0].params[1] == ACT_GELU_TANH
    x = np.random.default_rng(8).standard_normal((1, 7, 8)).astype(np.float32) * 2
    want = reference_run(m, {"x": x})["y"]
    for variant in ("simd", "relaxed", "scalar"):
        np.testing.assert_allclose(load_bundle(path, variant).run({"x": x})["y"], want, rtol=TOL, atol=TOL, err_msg=variant)


def test_other_constant_is_not_gelu(tmp_path) -> None:
    m = _model("a", False, cube=0.05)
    path = package(m, target="web", out=tmp_path / "b")
    kinds = [Op(n.op).name for n in layout.decode((path / "model.plan").read_bytes()).nodes]
    assert "UNARY" in kinds and kinds.count("BINARY") >= 4
    x = np.random.default_rng(8).standard_normal((1, 7, 8)).astype(np.float32)
    np.testing.assert_allclose(load_bundle(path, "relaxed").run({"x": x})["y"], reference_run(m, {"x": x})["y"],
                               rtol=TOL, atol=TOL)
