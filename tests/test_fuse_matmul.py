"""MatMul epilogue fusion (packager/passes/fuse_epilogue.py, MATMUL's params in matmul.c): a transformer's
MatMul + bias Add [+ residual Add] [+ GELU written out as Div/Erf/Add/Mul/Mul] runs as one MATMUL kernel, in
the shipped graph as one function call, on every wasm build, against onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from packager import load_bundle, package
from packager.reference import reference_run
from packager.passes.fuse_epilogue import ACT_GELU, ACT_NONE, fuse_epilogues, Fused
from packager.plan import layout
from packager.plan.opcodes import Op

from .conftest import f32, make_model

TOL = 1e-4


def _const(name: str, v) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(v, np.float32), name)


def _gelu(x: str, y: str, grouping: str, p: str) -> list[onnx.NodeProto]:
    """GELU as torch exports it: x * 0.5 * (1 + erf(x / sqrt 2)) ("a"), or (x * 0.5) * (1 + erf(x * 1/sqrt 2)) ("b")."""
    if grouping == "a":
        return [helper.make_node("Div", [x, "sqrt2"], [p + "d"]), helper.make_node("Erf", [p + "d"], [p + "e"]),
                helper.make_node("Add", [p + "e", "one"], [p + "p"]), helper.make_node("Mul", [x, p + "p"], [p + "m"]),
                helper.make_node("Mul", [p + "m", "half"], [y])]
    return [helper.make_node("Mul", [x, "half"], [p + "h"]), helper.make_node("Mul", [x, "rsqrt2"], [p + "d"]),
            helper.make_node("Erf", [p + "d"], [p + "e"]), helper.make_node("Add", ["one", p + "e"], [p + "p"]),
            helper.make_node("Mul", [p + "p", p + "h"], [y])]


def _ffn(s: int, d: int, f: int, grouping: str = "a", sqrt2: float = float(np.sqrt(2.0))) -> onnx.ModelProto:
    """x[1,s,d] -> MatMul W1 + b1 -> GELU -> MatMul W2 + b2 + x: a transformer's feed-forward block."""
    rng = np.random.default_rng(11)
    inits = [_const("w1", rng.standard_normal((d, f)) * 0.2), _const("b1", rng.standard_normal(f)),
             _const("w2", rng.standard_normal((f, d)) * 0.2), _const("b2", rng.standard_normal((1, d))),
             _const("sqrt2", sqrt2), _const("rsqrt2", 1.0 / sqrt2), _const("one", 1.0), _const("half", 0.5)]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             *_gelu("hb", "g", grouping, "g_"),
             helper.make_node("MatMul", ["g", "w2"], ["o"]), helper.make_node("Add", ["b2", "o"], ["ob"]),
             helper.make_node("Add", ["ob", "x"], ["y"])]
    return make_model(nodes, [f32("x", [1, s, d])], [f32("y", [1, s, d])], inits)


def _plan(path) -> layout.Plan:
    return layout.decode((path / "model.plan").read_bytes())


@pytest.mark.parametrize("s,grouping", [(19, "a"), (19, "b"), (5, "a")])
def test_ffn_block_is_two_matmul_kernels(s: int, grouping: str, tmp_path) -> None:
    # s = 19: A's rows in 4-row groups with a partial last one, B from panels; s = 5: the direct GEMM path
    model = _ffn(s, 24, 70, grouping)
    path = package(model, target="web", out=tmp_path / "b", emit_onnx=True)   # verify: the shipped graph against onnxruntime
    plan = _plan(path)
    assert [Op(n.op).name for n in plan.nodes] == ["MATMUL", "MATMUL"]
    up, down = plan.nodes
    assert up.params[:2] == [2, ACT_GELU] and len(up.inputs) == 4 and up.inputs[2] >= 0 and up.inputs[3] < 0
    assert down.params[:2] == [2, ACT_NONE] and down.inputs[3] >= 0   # bias and residual
    shipped = onnx.load(path / "model.onnx")
    assert [n.domain for n in shipped.graph.node] == ["ai.edgepack.fused"] * 2
    x = np.random.default_rng(2).standard_normal((1, s, 24)).astype(np.float32)
    want = reference_run(model, {"x": x})["y"]
    for variant in ("simd", "relaxed", "scalar"):
        got = load_bundle(path, variant).run({"x": x})["y"]
        np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL, err_msg=variant)


def test_not_gelu_is_not_fused_as_gelu(tmp_path) -> None:
    # x * 0.5 * (1 + erf(x / 1.5)) is not GELU: the bias still fuses, the chain runs as its own kernels
    model = _ffn(19, 8, 20, sqrt2=1.5)
    path = package(model, target="web", out=tmp_path / "b")
    kernels = [Op(n.op).name for n in _plan(path).nodes]
    assert "UNARY" in kernels and kernels.count("MATMUL") == 2
    assert _plan(path).nodes[0].params[:4] == [2, ACT_NONE, 0, 0]   # (+ [1]: constant B stored in panels)
    x = np.random.default_rng(3).standard_normal((1, 19, 8)).astype(np.float32)
    np.testing.assert_allclose(load_bundle(path, "simd").run({"x": x})["y"], reference_run(model, {"x": x})["y"],
                               rtol=TOL, atol=TOL)


def test_bias_must_lie_along_n() -> None:
    # a [s, 1] addend is no column bias (it is a row broadcast): MatMul stays alone
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "c"], ["y"])]
    shapes = {"x": (6, 4), "w": (4, 6), "h": (6, 6), "c": (6, 1), "y": (6, 6)}
    consts = {"w": np.zeros((4, 6), np.float32), "c": np.zeros((6, 1), np.float32)}
    steps = fuse_epilogues(nodes, ["y"], shapes, consts, 17)
    assert not any(isinstance(s, Fused) for s in steps)
    consts["c"] = np.zeros((1, 6), np.float32)
    shapes["c"] = (1, 6)
    (g,) = fuse_epilogues(nodes, ["y"], shapes, consts, 17)
    assert isinstance(g, Fused) and g.bias == "c" and g.residual is None


def test_batched_matmul_takes_a_residual(tmp_path) -> None:
    # attention-like [2,3,m,k] x [2,3,k,n] + a runtime tensor of the output's shape
    rng = np.random.default_rng(4)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["p"]), helper.make_node("Add", ["p", "r"], ["y"])],
                       [f32("a", [2, 3, 17, 8]), f32("b", [2, 3, 8, 20]), f32("r", [2, 3, 17, 20])],
                       [f32("y", [2, 3, 17, 20])])
    path = package(model, target="web", out=tmp_path / "b")
    assert [Op(n.op).name for n in _plan(path).nodes] == ["MATMUL"]
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in
             (("a", (2, 3, 17, 8)), ("b", (2, 3, 8, 20)), ("r", (2, 3, 17, 20)))}
    want = reference_run(model, feeds)["y"]
    for variant in ("simd", "scalar"):
        np.testing.assert_allclose(load_bundle(path, variant).run(feeds)["y"], want, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("grouping", ["a", "b"])
def test_conv_and_gemm_take_the_gelu_chain(grouping: str, tmp_path) -> None:
    # EfficientFormer's 1x1 MLPs and Whisper's stem: Conv -> GELU written out as five nodes (opset 17, no Gelu op).
    # One CONV kernel with the GELU epilogue, applied per row of each finished column block: K = 72 blocks the
    # 24x24 plane into 448 + 128 columns; 5 output channels leave a partial row panel. Then Gemm -> GELU.
    rng = np.random.default_rng(6)
    inits = [_const("w", rng.standard_normal((5, 8, 3, 3)) * 0.3), _const("b", rng.standard_normal(5)),
             _const("wg", rng.standard_normal((5 * 24 * 24, 30)) * 0.05), _const("bg", rng.standard_normal(30)),
             _const("sqrt2", np.sqrt(2.0)), _const("rsqrt2", 1.0 / np.sqrt(2.0)), _const("one", 1.0), _const("half", 0.5)]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), *_gelu("c", "a", grouping, "c_"),
             helper.make_node("Flatten", ["a"], ["f"]), helper.make_node("Gemm", ["f", "wg", "bg"], ["g"]),
             *_gelu("g", "y", grouping, "g_")]
    model = make_model(nodes, [f32("x", [1, 8, 24, 24])], [f32("y", [1, 30])], inits)
    path = package(model, target="web", out=tmp_path / "b", emit_onnx=True)   # verify: the shipped graph too
    plan = _plan(path)
    assert [Op(n.op).name for n in plan.nodes] == ["CONV", "GEMM"]
    assert plan.nodes[0].params[13] == ACT_GELU and plan.nodes[1].params[5] == ACT_GELU
    shipped = onnx.load(path / "model.onnx").graph.node
    assert [n.domain or n.op_type for n in shipped] == ["ai.edgepack.fused", "Flatten", "ai.edgepack.fused"]
    x = np.random.default_rng(7).standard_normal((1, 8, 24, 24)).astype(np.float32)
    want = reference_run(model, {"x": x})["y"]
    for variant in ("simd", "relaxed", "scalar"):
        got = load_bundle(path, variant).run({"x": x})["y"]
        np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL, err_msg=variant)
