"""The WebGPU backend (web/src/webgpu) in headless Chromium on SwiftShader: per-kernel shader tests on small
models packaged by the real packager, the five benchmark models, wasm fallback for kernels without a shader,
and refusal of hostile plans. Every output is compared with onnxruntime (CPU).

Tolerance: 1e-4 abs/rel (np.testing.assert_allclose rtol=atol=1e-4), the wasm standard. GPU float math
differs from the wasm core in the last bits (other summation order; WGSL exp/log/tanh/erf accuracy), which
stays far inside it: the benchmark models differ from onnxruntime by < 1e-6 absolute."""
from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.reference import reference_run

from .conftest import model_path, seeded_feeds

TOL = 1e-4
CHROMIUM = "/usr/bin/chromium"
BENCH_MODELS = ["cifar10net", "cifar10net_unfused", "mobilenetv2", "resnet18", "minilm_like"]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (scripts/setup.sh)")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    from .webgpu.browser import WebGPUPage
    p = WebGPUPage(tmp_path_factory.mktemp("webgpu") / "root")
    assert p.available(), "navigator.gpu has no adapter in headless Chromium (SwiftShader)"
    yield p
    p.close()


# ---- helpers ----------------------------------------------------------------------------------------------

def _model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    """A model whose outputs given without a shape (shape None) get the shape ONNX shape inference finds."""
    g = helper.make_graph(nodes, "webgpu", inputs, [], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(m, strict_mode=True).graph.value_info}
    m.graph.output.extend([inferred[o.name] if not o.type.tensor_type.HasField("shape") else o for o in outputs])
    return m


def _f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _i64(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.INT64, shape)


def _const(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


_RNG = np.random.default_rng(7)


def _w(*shape, scale=0.3):
    return (_RNG.standard_normal(shape) * scale).astype(np.float32)


def _feeds(bundle: Path, seed: int = 0, positive: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """seeded_feeds; the float inputs named in `positive` made > 0 (for ops such as Log and Sqrt)."""
    feeds = seeded_feeds(load_bundle(bundle).inputs, seed)
    return {k: np.abs(a) + 0.1 if k in positive and a.dtype == np.float32 else a for k, a in feeds.items()}


def _compare(got: dict, want: dict, what: str) -> None:
    assert set(got) == set(want), what
    for k, w in want.items():
        assert got[k].dtype == w.dtype and got[k].shape == w.shape, f"{what} {k}"
        np.testing.assert_allclose(got[k], w, rtol=TOL, atol=TOL, err_msg=f"{what} output {k}")


def _run_case(page, tmp_path: Path, model: onnx.ModelProto, wasm: set[str] = frozenset(), feeds=None,
              positive: tuple[str, ...] = (), **opts) -> dict:
    """Packages `model`, runs it on WebGPU, compares with onnxruntime; the nodes placed on the wasm core
    must be exactly the kernels in `wasm`. Returns the open() info."""
    bundle = package(model, out=tmp_path / "bundle", verify=False, emit_onnx=True)
    info = page.open(bundle, **opts)
    assert "error" not in info, info
    on_wasm = {p["op"] for p in info["placement"] if p["on"] == "wasm"}
    assert on_wasm == set(wasm), info["placement"]
    feeds = feeds or _feeds(bundle, positive=positive)
    res = page.run(feeds)
    assert "error" not in res, res
    _compare(res["gpu"], reference_run(onnx.load(str(bundle / "model.onnx")), feeds), "webgpu")
    return info


def _kernels(bundle: Path) -> list[str]:
    from packager.plan.layout import decode
    from packager.plan.opcodes import Op
    return [Op(n.op).name for n in decode((bundle / "model.plan").read_bytes()).nodes]


# ---- per-kernel shader tests ------------------------------------------------------------------------------

def _conv_cases() -> dict[str, onnx.ModelProto]:
    cases = {}
    # strided, padded, grouped conv with bias and fused relu (CONV)
    cases["conv_group_stride_relu"] = _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 2, 0, 1], strides=[2, 1], group=2),
         helper.make_node("Relu", ["c"], ["y"])],
        [_f32("x", [2, 4, 9, 7])], [_f32("y", None)], [_const("w", _w(6, 2, 3, 3)), _const("b", _w(6))])
    # dilated 1-D conv with leaky relu
    cases["conv1d_dilated_leaky"] = _model(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[2, 1], dilations=[2]),
         helper.make_node("LeakyRelu", ["c"], ["y"], alpha=0.2)],
        [_f32("x", [1, 3, 11])], [_f32("y", None)], [_const("w", _w(5, 3, 3))])
    # 1x1 convs (the matrix-product path), residual add and clip fused
    cases["conv1x1_residual_clip"] = _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"]), helper.make_node("Add", ["c", "r"], ["s"]),
         helper.make_node("Clip", ["s", "lo", "hi"], ["y"])],
        [_f32("x", [2, 5, 6, 6]), _f32("r", [2, 7, 6, 6])], [_f32("y", None)],
        [_const("w", _w(7, 5, 1, 1)), _const("b", _w(7)), _const("lo", np.float32(-0.5)), _const("hi", np.float32(0.7))])
    # 3x3 stride-1 conv with >= 16 channels: WINOGRAD_CONV, odd output size, bias, relu
    cases["winograd"] = _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 0, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
        [_f32("x", [1, 16, 7, 9])], [_f32("y", None)], [_const("w", _w(20, 16, 3, 3, scale=0.1)), _const("b", _w(20))])
    # batch 2 with a residual (the packager fuses the Add into the Winograd epilogue)
    cases["winograd_batch_residual"] = _model(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["c", "r"], ["y"])],
        [_f32("x", [2, 16, 6, 5]), _f32("r", [2, 16, 6, 5])], [_f32("y", None)], [_const("w", _w(16, 16, 3, 3, scale=0.1))])
    # dilated depthwise with a residual
    cases["depthwise_dilated_residual"] = _model(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[2, 1, 2, 1], dilations=[2, 1], group=4),
         helper.make_node("Add", ["c", "r"], ["y"])],
        [_f32("x", [2, 4, 7, 6]), _f32("r", [2, 4, 7, 6])], [_f32("y", None)], [_const("w", _w(4, 1, 3, 3))])
    # depthwise, stride 2, relu6
    cases["depthwise_relu6"] = _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2], group=6),
         helper.make_node("Clip", ["c", "lo", "hi"], ["y"])],
        [_f32("x", [1, 6, 9, 10])], [_f32("y", None)],
        [_const("w", _w(6, 1, 3, 3)), _const("b", _w(6)), _const("lo", np.float32(0)), _const("hi", np.float32(0.6))])
    return cases


CONV_CASES = _conv_cases()
CONV_KERNEL = {"conv_group_stride_relu": "CONV", "conv1d_dilated_leaky": "CONV", "conv1x1_residual_clip": "CONV",
               "winograd": "WINOGRAD_CONV", "winograd_batch_residual": "WINOGRAD_CONV", "depthwise_relu6": "DEPTHWISE_CONV",
               "depthwise_dilated_residual": "DEPTHWISE_CONV"}


@pytest.mark.parametrize("name", list(CONV_CASES))
def test_conv_kernels(page, name, tmp_path) -> None:
    bundle = package(CONV_CASES[name], out=tmp_path / "k", verify=False)
    assert _kernels(bundle) == [CONV_KERNEL[name]], "the packager should fuse the epilogue into one kernel"
    _run_case(page, tmp_path, CONV_CASES[name])


EPILOGUE_ACTS = [("Sigmoid", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.6}), ("HardSwish", {}), ("Tanh", {}),
                 ("Gelu", {}), ("Gelu", {"approximate": "tanh"}), ("SiLU", {})]


def _act_nodes(op: str, attrs: dict, x: str, y: str) -> list:
    """One activation node, or SiLU as exporters write it: x * Sigmoid(x) (activation 43 once fused)."""
    if op == "SiLU":
        return [helper.make_node("Sigmoid", [x], [y + "_s"]), helper.make_node("Mul", [x, y + "_s"], [y])]
    return [helper.make_node(op, [x], [y], **attrs)]


@pytest.mark.parametrize("act", range(len(EPILOGUE_ACTS)))
def test_conv_gemm_epilogue_activations(page, act, tmp_path) -> None:
    """Activations 4..9 and 43 (SiLU) after CONV, WINOGRAD_CONV, DEPTHWISE_CONV and GEMM: fused into the epilogue where
    the packager fuses them (the act() of the shader), separate UNARY nodes otherwise; all on the GPU."""
    op, attrs = EPILOGUE_ACTS[act]
    nodes, outs = [], []
    for i, conv in enumerate([dict(pads=[1, 1, 1, 1]), dict(pads=[1, 1, 1, 1]), dict(pads=[1, 1, 1, 1], group=16)]):
        src = "x" if i == 0 else "x16"
        nodes += [helper.make_node("Conv", [src, f"w{i}", f"b{i}"], [f"c{i}"], **conv), *_act_nodes(op, attrs, f"c{i}", f"y{i}")]
        outs.append(f"y{i}")
    nodes += [helper.make_node("Gemm", ["g", "gw", "gb"], ["gm"]), *_act_nodes(op, attrs, "gm", "gy")]
    inits = [_const("w0", _w(4, 3, 3, 3)), _const("w1", _w(16, 16, 3, 3, scale=0.1)), _const("w2", _w(16, 1, 3, 3)),
             _const("b0", _w(4)), _const("b1", _w(16)), _const("b2", _w(16)), _const("gw", _w(12, 8)), _const("gb", _w(8))]
    model = _model(nodes, [_f32("x", [1, 3, 6, 6]), _f32("x16", [1, 16, 5, 5]), _f32("g", [3, 12])],
                   [_f32(o, None) for o in outs + ["gy"]], inits, opset=20)
    _run_case(page, tmp_path, model)


def _linalg_cases() -> dict[str, tuple[onnx.ModelProto, set[str]]]:
    c = {}
    c["gemm_transposed_runtime_b"] = (_model(
        [helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0)],
        [_f32("a", [7, 5]), _f32("b", [9, 7])], [_f32("y", None)], [_const("c", _w(9))]), set())
    c["gemm_bias_rows_relu"] = (_model(
        [helper.make_node("Gemm", ["a", "b", "c"], ["g"]), helper.make_node("Relu", ["g"], ["y"])],
        [_f32("a", [6, 10])], [_f32("y", None)], [_const("b", _w(10, 11)), _const("c", _w(6, 1))]), set())
    c["gemm_scalar_bias"] = (_model(
        [helper.make_node("Gemm", ["a", "b", "c"], ["y"], beta=0.25)],
        [_f32("a", [3, 8])], [_f32("y", None)], [_const("b", _w(8, 12)), _const("c", _w(1))]), set())
    c["matmul_batched"] = (_model(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], [_f32("a", [2, 3, 5, 4]), _f32("b", [2, 3, 4, 6])],
        [_f32("y", None)]), set())
    c["matmul_broadcast_b"] = (_model(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], [_f32("a", [2, 3, 5, 4]), _f32("b", [1, 3, 4, 8])],
        [_f32("y", None)]), set())
    c["matmul_const_b"] = (_model(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], [_f32("a", [3, 9, 13])], [_f32("y", None)],
        [_const("b", _w(13, 8))]), set())
    # batch dims broadcast on both sides
    c["matmul_mixed_broadcast"] = (_model(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], [_f32("a", [2, 1, 5, 4]), _f32("b", [1, 3, 4, 6])],
        [_f32("y", None)]), set())
    # MATMUL's fused epilogue: bias along N + the Erf-chain GELU; a batched one with a residual + relu
    c["matmul_fused_bias_gelu"] = (_model(
        [helper.make_node("MatMul", ["a", "w"], ["h"]), helper.make_node("Add", ["h", "bias"], ["hb"]),
         helper.make_node("Div", ["hb", "r2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
         helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["hb", "p"], ["m"]),
         helper.make_node("Mul", ["m", "half"], ["y"])], [_f32("a", [1, 5, 8])], [_f32("y", None)],
        [_const("w", _w(8, 12)), _const("bias", _w(12)), _const("r2", np.float32(np.sqrt(2.0))),
         _const("one", np.float32(1.0)), _const("half", np.float32(0.5))]), set())
    c["matmul_fused_residual_relu"] = (_model(
        [helper.make_node("MatMul", ["a", "b"], ["p"]), helper.make_node("Add", ["p", "r"], ["s"]),
         helper.make_node("Relu", ["s"], ["y"])], [_f32("a", [2, 3, 5, 4]), _f32("b", [2, 3, 4, 6]), _f32("r", [2, 3, 5, 6])],
        [_f32("y", None)]), set())
    # ATTENTION with masks: a causal constant (the causal words) and a mask fed at run time (the 4th input, broadcast
    # over heads and query rows); a Where on a bool condition computed at run time (a WHERE makes the additive mask)
    lowest = np.finfo(np.float32).min
    c["attention_causal_mask"] = (_model(
        [helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Add", ["s", "tri"], ["st"]),
         helper.make_node("Add", ["st", "m"], ["sm"]), helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
         helper.make_node("MatMul", ["p", "v"], ["y"])],
        [_f32("q", [2, 3, 5, 4]), _f32("kt", [2, 3, 4, 7]), _f32("v", [2, 3, 7, 6]), _f32("m", [2, 1, 1, 7])], [_f32("y", None)],
        [_const("tri", np.triu(np.full((5, 7), lowest, np.float32), 3).reshape(1, 1, 5, 7))]), set())
    c["attention_where_mask"] = (_model(
        [helper.make_node("Greater", ["k", "zero"], ["keep"]),
         helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Where", ["keep", "s", "fill"], ["sm"]),
         helper.make_node("Softmax", ["sm"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])],
        [_f32("q", [2, 3, 5, 4]), _f32("kt", [2, 3, 4, 7]), _f32("v", [2, 3, 7, 6]), _f32("k", [2, 1, 5, 7])],
        [_f32("y", None)], [_const("fill", np.float32(lowest)), _const("zero", np.float32(0))]), set())
    return c


LINALG_CASES = _linalg_cases()


@pytest.mark.parametrize("name", list(LINALG_CASES))
def test_gemm_matmul(page, name, tmp_path) -> None:
    model, wasm = LINALG_CASES[name]
    _run_case(page, tmp_path, model, wasm)


def test_pools(page, tmp_path) -> None:
    x = [_f32("x", [2, 3, 11, 9])]
    model = _model([
        helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], dilations=[1, 2]),
        helper.make_node("AveragePool", ["x"], ["a0"], kernel_shape=[3, 3], strides=[2, 1], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["x"], ["a1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1),
        helper.make_node("LpPool", ["x"], ["lp"], kernel_shape=[2, 2], p=3),
        helper.make_node("MaxPool", ["x"], ["cm"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        helper.make_node("GlobalMaxPool", ["x"], ["gm"]), helper.make_node("GlobalAveragePool", ["x"], ["ga"]),
    ], x, [_f32(n, None) for n in ("m", "a0", "a1", "lp", "cm", "gm", "ga")])
    _run_case(page, tmp_path / "2d", model)
    model1 = _model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 1]),
                     helper.make_node("AveragePool", ["x"], ["z"], kernel_shape=[2])],
                    [_f32("x", [1, 4, 10])], [_f32("y", None), _f32("z", None)])
    _run_case(page, tmp_path / "1d", model1)


UNARY_OPS = [("Sigmoid", {}), ("Tanh", {}), ("Erf", {}), ("Exp", {}), ("Neg", {}), ("Abs", {}), ("Floor", {}),
             ("Ceil", {}), ("Round", {}), ("Sign", {}), ("Elu", {"alpha": 0.7}), ("Selu", {}), ("Celu", {"alpha": 1.3}),
             ("Softplus", {}), ("Softsign", {}), ("ThresholdedRelu", {"alpha": 0.3}), ("Sin", {}), ("Cos", {}),
             ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("HardSwish", {}), ("LeakyRelu", {"alpha": 0.1}),
             ("Reciprocal", {}), ("Relu", {})]
POSITIVE_OPS = [("Log", {}), ("Sqrt", {})]


def test_unary(page, tmp_path) -> None:
    nodes = [helper.make_node(op, ["x"], [f"y_{op}"], **a) for op, a in UNARY_OPS]
    nodes += [helper.make_node(op, ["p"], [f"y_{op}"], **a) for op, a in POSITIVE_OPS]
    nodes += [helper.make_node("Pow", ["x", "e3"], ["y_pow3"]), helper.make_node("Pow", ["p", "e"], ["y_powf"]),
              helper.make_node("Clip", ["x", "lo", "hi"], ["y_clip"])]
    outs = [f"y_{op}" for op, _ in UNARY_OPS + POSITIVE_OPS] + ["y_pow3", "y_powf", "y_clip"]
    model = _model(nodes, [_f32("x", [3, 50]), _f32("p", [3, 50])], [_f32(o, None) for o in outs],
                   [_const("e3", np.float32(3)), _const("e", np.float32(0.7)), _const("lo", np.float32(-0.2)),
                    _const("hi", np.float32(0.9))])
    bundle = package(model, out=tmp_path / "k", verify=False)
    assert set(_kernels(bundle)) == {"UNARY"}, _kernels(bundle)
    _run_case(page, tmp_path, model, positive=("p",))


def test_binary_broadcast(page, tmp_path) -> None:
    ops = ["Add", "Sub", "Mul", "Div", "Min", "Max"]
    nodes, outs = [], []
    for i, op in enumerate(ops):
        other = ["b", "s", "r", "c", "b", "r"][i]
        nodes.append(helper.make_node(op, ["a", other], [f"{op}_1"]))
        nodes.append(helper.make_node(op, [other, "a"], [f"{op}_2"]))
        outs += [f"{op}_1", f"{op}_2"]
    nodes += [helper.make_node("PRelu", ["a", "slope"], ["prelu"]), helper.make_node("Pow", ["p", "b"], ["pow"])]
    outs += ["prelu", "pow"]
    model = _model(nodes, [_f32("a", [2, 3, 4, 5]), _f32("b", [3, 1, 5]), _f32("r", [5]), _f32("p", [2, 3, 4, 5])],
                   [_f32(o, None) for o in outs],
                   [_const("s", np.float32(1.5)), _const("c", (np.abs(_w(2, 1, 4, 1)) + 0.5)), _const("slope", _w(3, 1, 1))])
    _run_case(page, tmp_path, model, positive=("p",))


def test_batchnorm_folded_and_unfolded(page, tmp_path) -> None:
    C = 5
    consts = [_const("sc", _w(C) + 1), _const("bi", _w(C)), _const("mu", _w(C)), _const("var", np.abs(_w(C)) + 0.5)]
    folded = _model([helper.make_node("BatchNormalization", ["x", "sc", "bi", "mu", "var"], ["y"], epsilon=1e-3)],
                    [_f32("x", [2, C, 4, 3])], [_f32("y", None)], consts)
    _run_case(page, tmp_path / "f", folded)
    # statistics as graph inputs: the unfolded five-input kernel
    unfolded = _model([helper.make_node("BatchNormalization", ["x", "sc", "bi", "mu", "v"], ["y"], epsilon=1e-3)],
                      [_f32("x", [2, C, 6]), _f32("v", [C])], [_f32("y", None)], consts[:3])
    bundle = package(unfolded, out=tmp_path / "k", verify=False)
    assert _kernels(bundle) == ["BATCHNORM"]
    _run_case(page, tmp_path / "u", unfolded, positive=("v",))


def test_softmax_layernorm_reduce(page, tmp_path) -> None:
    nodes = [
        helper.make_node("Softmax", ["x"], ["sm_last"], axis=-1), helper.make_node("Softmax", ["x"], ["sm_1"], axis=1),
        helper.make_node("LogSoftmax", ["x"], ["lsm"], axis=2),
        helper.make_node("LayerNormalization", ["x", "g", "b"], ["ln", "ln_mean", "ln_inv"], axis=-1, epsilon=1e-5),
        helper.make_node("LayerNormalization", ["x", "g2"], ["ln2"], axis=1),
        helper.make_node("ReduceMean", ["x"], ["rmean"], axes=[1], keepdims=0),
        helper.make_node("ReduceSum", ["x", "ax02"], ["rsum"], keepdims=1),
        helper.make_node("ReduceMax", ["x"], ["rmax"], axes=[2]), helper.make_node("ReduceMin", ["x"], ["rmin"], axes=[0, 1]),
        helper.make_node("ReduceProd", ["x"], ["rprod"], axes=[1]), helper.make_node("ReduceL1", ["x"], ["rl1"], axes=[2]),
        helper.make_node("ReduceL2", ["x"], ["rl2"], axes=[2]), helper.make_node("ReduceSumSquare", ["x"], ["rss"], axes=[1]),
        helper.make_node("ReduceLogSum", ["p"], ["rls"], axes=[2]),
        helper.make_node("ReduceLogSumExp", ["x"], ["rlse"], axes=[1, 2], keepdims=0),
    ]
    outs = ["sm_last", "sm_1", "lsm", "ln", "ln_mean", "ln_inv", "ln2", "rmean", "rsum", "rmax", "rmin", "rprod",
            "rl1", "rl2", "rss", "rls", "rlse"]
    model = _model(nodes, [_f32("x", [2, 6, 7]), _f32("p", [2, 6, 7])], [_f32(o, None) for o in outs],
                   [_const("g", _w(7) + 1), _const("b", _w(7)), _const("g2", _w(6, 7) + 1), _const("ax02", np.array([0, 2], np.int64))])
    _run_case(page, tmp_path, model, positive=("p",))


def test_long_rows(page, tmp_path) -> None:
    """SOFTMAX and LAYERNORM rows of >= 128 elements: one workgroup per row, tree reductions."""
    model = _model([
        helper.make_node("Softmax", ["x"], ["sm"], axis=-1), helper.make_node("LogSoftmax", ["x"], ["lsm"], axis=-1),
        helper.make_node("LayerNormalization", ["x", "g", "b"], ["ln", "mean", "inv"], axis=-1),
        helper.make_node("LayerNormalization", ["x", "g2"], ["ln2"], axis=1),
    ], [_f32("x", [3, 5, 301])], [_f32(n, None) for n in ("sm", "lsm", "ln", "mean", "inv", "ln2")],
        [_const("g", _w(301) + 1), _const("b", _w(301)), _const("g2", _w(5, 301) + 1)])
    bundle = package(model, out=tmp_path / "k", verify=False)
    feeds = _feeds(bundle)
    feeds["x"] = (feeds["x"] * 4 + 3).astype(np.float32)
    _run_case(page, tmp_path, model, feeds=feeds)


def test_data_movement(page, tmp_path) -> None:
    table = _w(10, 6)
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"], axis=0),           # int64 indices, some negative
        helper.make_node("Gather", ["x", "ids32"], ["g1"], axis=1),               # int32 indices, runtime data
        helper.make_node("Gather", ["x", "k"], ["g_scalar"], axis=2),             # scalar index
        helper.make_node("Gather", ["ids", "sel"], ["g_int64"], axis=1),          # int64 data (8-byte elements)
        helper.make_node("Transpose", ["x"], ["tr"], perm=[2, 0, 1]),
        helper.make_node("Transpose", ["ids"], ["tr64"], perm=[1, 0]),
        helper.make_node("Slice", ["x", "st", "en", "axs", "sp"], ["sl"]),
        helper.make_node("Concat", ["x", "cst", "x"], ["cat"], axis=1),
        helper.make_node("Concat", ["ids", "ids"], ["cat64"], axis=0),
    ]
    inits = [_const("table", table), _const("ids32", np.array([3, -1, 0, 3], np.int32)), _const("k", np.int64(-2)),
             _const("sel", np.array([2, 0], np.int64)), _const("st", np.array([4, 1], np.int64)),
             _const("en", np.array([0, 100], np.int64)), _const("axs", np.array([2, 1], np.int64)),
             _const("sp", np.array([-2, 2], np.int64)), _const("cst", _w(2, 2, 5))]
    outs = [_f32("emb", None), _f32("g1", None), _f32("g_scalar", None), _i64("g_int64", None), _f32("tr", None),
            _i64("tr64", None), _f32("sl", None), _f32("cat", None), _i64("cat64", None)]
    model = _model(nodes, [_f32("x", [2, 4, 5]), _i64("ids", [2, 3])], outs, inits)
    bundle = package(model, out=tmp_path / "k", verify=False)
    assert {"GATHER", "TRANSPOSE", "SLICE", "CONCAT"} <= set(_kernels(bundle))
    feeds = _feeds(bundle)
    feeds["ids"] = np.array([[1, -3, 9], [0, -10, 4]], np.int64)
    _run_case(page, tmp_path, model, feeds=feeds)


def _i32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.INT32, shape)


def test_pad_expand_split_where_cast(page, tmp_path) -> None:
    nodes = [helper.make_node("Pad", ["x", f"pads{m}"] + (["pv"] if m == "constant" else []), [f"pad_{m}"], mode=m)
             for m in ("constant", "reflect", "edge", "wrap")]
    nodes += [
        helper.make_node("Pad", ["x", "crop"], ["pad_crop"]),
        helper.make_node("Pad", ["ids", "pads_i"], ["pad_i64"], mode="reflect"),
        helper.make_node("Expand", ["v", "shape"], ["expanded"]), helper.make_node("Expand", ["ids", "shape_i"], ["expanded_i64"]),
        helper.make_node("Split", ["x", "parts"], ["s0", "s1", "s2"], axis=2),
        helper.make_node("Greater", ["x", "zero"], ["mask"]),
        helper.make_node("Where", ["mask", "x", "v"], ["where_f"]), helper.make_node("Where", ["cmask", "ids", "ids2"], ["where_i64"]),
        helper.make_node("Cast", ["x", ], ["f2i"], to=TensorProto.INT32), helper.make_node("Cast", ["n32"], ["i2f"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["n32"], ["i2l"], to=TensorProto.INT64), helper.make_node("Cast", ["ids"], ["l2i"], to=TensorProto.INT32),
        helper.make_node("Cast", ["ids"], ["l2f"], to=TensorProto.FLOAT), helper.make_node("Cast", ["big"], ["f2l"], to=TensorProto.INT64),
        helper.make_node("Cast", ["mask"], ["b2f"], to=TensorProto.FLOAT), helper.make_node("Cast", ["cmask"], ["b2l"], to=TensorProto.INT64),
    ]
    pads = np.array([0, 1, 2, 3, 0, 2, 1, 0], np.int64)
    inits = [_const(f"pads{m}", pads) for m in ("constant", "reflect", "edge", "wrap")] + [
        _const("pv", np.float32(-7.5)), _const("crop", np.array([0, -1, 1, 0, 0, 0, -2, 1], np.int64)),
        _const("pads_i", np.array([0, 1, 0, 2], np.int64)), _const("shape", np.array([2, 3, 5, 4], np.int64)),
        _const("shape_i", np.array([2, 2, 3], np.int64)), _const("parts", np.array([1, 2, 2], np.int64)),
        _const("zero", np.float32(0)), _const("cmask", np.array([[True, False, True]])),
        _const("ids2", np.array([[7, 8, 9], [10, 11, 12]], np.int64)),
        _const("big", np.array([1.5e10, -3.7e12, -1.5, 2.9e9, -2.2e9, 4e18, -4e18, 7.0], np.float32))]
    outs = [_f32(f"pad_{m}", None) for m in ("constant", "reflect", "edge", "wrap")] + [
        _f32("pad_crop", None), _i64("pad_i64", None), _f32("expanded", None), _i64("expanded_i64", None),
        _f32("s0", None), _f32("s1", None), _f32("s2", None), _f32("where_f", None), _i64("where_i64", None),
        _i32("f2i", None), _f32("i2f", None), _i64("i2l", None), _i32("l2i", None), _f32("l2f", None), _i64("f2l", None),
        _f32("b2f", None), _i64("b2l", None)]
    model = _model(nodes, [_f32("x", [2, 3, 5, 4]), _f32("v", [3, 1, 4]), _i64("ids", [2, 3]), _i32("n32", [7])], outs, inits)
    bundle = package(model, out=tmp_path / "k", verify=False)
    assert {"PAD", "EXPAND", "SPLIT", "WHERE", "CAST"} <= set(_kernels(bundle)), _kernels(bundle)
    feeds = _feeds(bundle)
    feeds["x"] = (feeds["x"] * 1e3).astype(np.float32)
    feeds["ids"] = np.array([[1, -3, 2**40], [0, -2**35, 4]], np.int64)
    feeds["n32"] = np.array([0, -1, 5, 2**31 - 1, -2**31, 123456789, -77], np.int32)
    _run_case(page, tmp_path, model, feeds=feeds)


def test_bool_outputs(page, tmp_path) -> None:
    """Comparisons on float32 / int32 / int64 / bool, And/Or/Xor, Not and casts to bool write 1-byte
    elements: 4 per thread, one word per store (odd element counts check the tensor's last word)."""
    nodes, outs = [], []
    for op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"):
        for a, b, tag in (("x", "xb", "f"), ("n", "nc", "i32"), ("ids", "idc", "i64")):
            if op in ("LessOrEqual", "GreaterOrEqual") and tag != "f":
                continue
            nodes.append(helper.make_node(op, [a, b], [f"{op}_{tag}"]))
            outs.append(f"{op}_{tag}")
    nodes += [helper.make_node("Greater", ["x", "zero"], ["m1"]), helper.make_node("Less", ["x", "half"], ["m2"]),
              helper.make_node("And", ["m1", "m2"], ["and"]), helper.make_node("Or", ["m1", "bc"], ["or"]),
              helper.make_node("Xor", ["m1", "m2"], ["xor"]), helper.make_node("Not", ["m1"], ["not"]),
              helper.make_node("Cast", ["x"], ["x2b"], to=TensorProto.BOOL), helper.make_node("Cast", ["ids"], ["l2b"], to=TensorProto.BOOL),
              helper.make_node("Cast", ["n"], ["i2b"], to=TensorProto.BOOL), helper.make_node("Equal", ["m1", "m2"], ["beq"])]
    outs += ["m1", "m2", "and", "or", "xor", "not", "x2b", "l2b", "i2b", "beq"]
    model = _model(nodes, [_f32("x", [3, 7]), _f32("xb", [7]), _i32("n", [5]), _i64("ids", [2, 3])],
                   [helper.make_tensor_value_info(o, TensorProto.BOOL, None) for o in outs],
                   [_const("nc", np.array([0, 3, -2, 7, 3], np.int32)), _const("idc", np.array([1, -(2**40), 5], np.int64)),
                    _const("zero", np.float32(0)), _const("half", np.float32(0.5)), _const("bc", np.array([True, False] * 3 + [True]))])
    bundle = package(model, out=tmp_path / "k", verify=False)
    feeds = _feeds(bundle)
    feeds["x"][0, :3] = [0.0, -0.0, 0.5]
    feeds["xb"][:3] = [0.0, 0.0, 0.5]
    feeds["n"] = np.array([0, 3, -5, 7, 2**31 - 1], np.int32)
    feeds["ids"] = np.array([[1, -(2**40), 0], [2**40, -(2**40), 5]], np.int64)
    _run_case(page, tmp_path, model, feeds=feeds)


def test_resize_and_conv_transpose(page, tmp_path) -> None:
    x = [_f32("x", [1, 3, 5, 6])]
    nodes = [
        helper.make_node("Resize", ["x", "", "s2"], ["nearest"], mode="nearest"),
        helper.make_node("Resize", ["x", "", "s2"], ["linear"], mode="linear"),
        helper.make_node("Resize", ["x", "", "", "size"], ["cubic"], mode="cubic", coordinate_transformation_mode="align_corners"),
        helper.make_node("Resize", ["x", "", "sdown"], ["aa"], mode="linear", antialias=1),
        helper.make_node("Resize", ["x", "roi", "s2"], ["crop"], mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
                         extrapolation_value=-3.0),
        helper.make_node("ConvTranspose", ["x", "w", "b"], ["ct"], strides=[2, 3], pads=[1, 0, 0, 2], dilations=[2, 1],
                         output_padding=[1, 0], group=3),
        helper.make_node("ConvTranspose", ["x1", "w1"], ["ct1"], strides=[2], pads=[1, 1]),
    ]
    inits = [_const("s2", np.array([1, 1, 2, 1.5], np.float32)), _const("size", np.array([1, 3, 9, 4], np.int64)),
             _const("sdown", np.array([1, 1, 0.5, 0.6], np.float32)),
             _const("roi", np.array([0, 0, -0.2, 0.1, 1, 1, 1.3, 0.8], np.float32)),
             _const("w", _w(3, 2, 3, 2)), _const("b", _w(6)), _const("w1", _w(2, 4, 3))]
    outs = [_f32(n, None) for n in ("nearest", "linear", "cubic", "aa", "crop", "ct", "ct1")]
    model = _model(nodes, x + [_f32("x1", [1, 2, 7])], outs, inits, opset=19)
    bundle = package(model, out=tmp_path / "k", verify=False)
    assert {"RESIZE", "CONV_TRANSPOSE"} <= set(_kernels(bundle)), _kernels(bundle)
    _run_case(page, tmp_path, model)


def test_gather_index_out_of_range_is_an_error(page, tmp_path) -> None:
    model = _model([helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)], [_i64("ids", [4])], [_f32("y", None)],
                   [_const("table", _w(10, 3))])
    bundle = package(model, out=tmp_path / "b", verify=False, emit_onnx=True)
    info = page.open(bundle)
    assert info["placement"] == [{"node": 0, "op": "GATHER", "on": "gpu"}]
    ok = page.run({"ids": np.array([0, 9, -10, 2], np.int64)})
    np.testing.assert_array_equal(ok["gpu"]["y"], reference_run(onnx.load(str(bundle / "model.onnx")), {"ids": np.array([0, 9, -10, 2])})["y"])
    for bad in ([0, 10, 1, 2], [-11, 0, 0, 0], [0, 0, 0, 2**40]):
        res = page.run({"ids": np.array(bad, np.int64)})
        assert res.get("name") == "EdgepackError" and "node 0 (GATHER): index out of range" in res["error"], res


# ---- fallback to the wasm core ----------------------------------------------------------------------------

def test_kernel_without_shader_falls_back_to_wasm(page, tmp_path) -> None:
    """GatherElements and integer arithmetic have no shader: they run on the wasm core between GPU nodes,
    which exchange only their tensors (an int64 sum made on the core indexes a GPU Gather)."""
    idx = np.random.default_rng(3).integers(0, 3, (1, 3, 4, 4)).astype(np.int64)
    model = _model([
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GatherElements", ["r", "gi"], ["ge"], axis=1),
        helper.make_node("Softmax", ["ge"], ["sm"], axis=-1),
        helper.make_node("Add", ["ids", "one"], ["ids1"]),
        helper.make_node("Gather", ["table", "ids1"], ["emb"], axis=0),
        helper.make_node("MatMul", ["sm", "emb"], ["y"]),
    ], [_f32("x", [1, 2, 4, 4]), _i64("ids", [4])], [_f32("y", None), _f32("r", None)],
        [_const("w", _w(3, 2, 3, 3)), _const("gi", idx), _const("one", np.int64(1)), _const("table", _w(9, 5))])
    bundle = package(model, out=tmp_path / "k", verify=False)
    feeds = _feeds(bundle)
    feeds["ids"] = np.array([0, 7, 3, -1], np.int64)
    info = _run_case(page, tmp_path, model, wasm={"GATHER", "BINARY"}, feeds=feeds)
    gpu = [p["op"] for p in info["placement"] if p["on"] == "gpu"]
    assert {"CONV", "SOFTMAX", "GATHER", "MATMUL"} <= set(gpu), info["placement"]
    why = {p["op"]: p.get("why") for p in info["placement"] if p["on"] == "wasm"}
    assert why == {"GATHER": "GatherElements", "BINARY": "non-float32 tensors"}, why


def test_fallback_at_graph_input_and_output(page, tmp_path) -> None:
    """A graph input read only by a wasm node, a graph output written by one, and a wasm node whose input
    comes straight from another wasm node (nothing moves between them)."""
    rng = np.random.default_rng(4)
    model = _model([
        helper.make_node("GatherElements", ["x", "i0"], ["p"], axis=3),
        helper.make_node("Conv", ["p", "w"], ["c"]),
        helper.make_node("GatherElements", ["c", "i1"], ["q"], axis=1),
        helper.make_node("GatherElements", ["q", "i1"], ["y"], axis=1),
    ], [_f32("x", [1, 2, 5, 5])], [_f32("y", None), _f32("c", None)],
        [_const("i0", rng.integers(-5, 5, (1, 2, 5, 5)).astype(np.int64)), _const("w", _w(4, 2, 3, 3)),
         _const("i1", rng.integers(0, 4, (1, 4, 3, 3)).astype(np.int64))])
    info = _run_case(page, tmp_path, model, wasm={"GATHER"})
    assert [p["on"] for p in info["placement"]] == ["wasm", "gpu", "wasm", "wasm"], info["placement"]


def test_run_errors_and_destroy(page, small_bundle) -> None:
    assert "error" not in page.open(small_bundle)
    res = page.run({"x": np.zeros((2, 4, 9, 6), np.float32)})
    assert res.get("name") == "EdgepackError" and "input 'x': 432 elements" in res["error"], res
    ok = page.run(_feeds(small_bundle))
    assert "error" not in ok, ok
    page.page.evaluate("ep.destroy()")
    res = page.run(_feeds(small_bundle))
    assert res.get("name") == "EdgepackError" and "backend destroyed" in res["error"], res


def test_concurrent_runs_queue(page, small_bundle) -> None:
    assert "error" not in page.open(small_bundle)
    feeds = [_feeds(small_bundle, seed) for seed in range(3)]
    ref = onnx.load(str(small_bundle / "model.onnx"))
    for f, got in zip(feeds, page.run_concurrent(feeds)):
        _compare(got, reference_run(ref, f), "concurrent run")


NODE_NO_GPU = """
const { webgpuAvailable, createWebGPUBackend } = await import(process.argv[2]);
const out = { available: await webgpuAvailable() };
try { await createWebGPUBackend({ plan: new Uint8Array(64), manifest: {}, wasm: null }); } catch (e) { out.name = e.name; out.error = e.message; }
console.log(JSON.stringify(out));
"""


@pytest.mark.skipif(not shutil.which("node"), reason="needs Node")
def test_without_webgpu_node(tmp_path) -> None:
    """Node has no navigator.gpu: webgpuAvailable() is false and createWebGPUBackend says why."""
    import subprocess
    (tmp_path / "t.mjs").write_text(NODE_NO_GPU)
    index = Path(__file__).resolve().parent.parent / "web" / "src" / "webgpu" / "index.js"
    r = subprocess.run(["node", str(tmp_path / "t.mjs"), index.as_uri()], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out == {"available": False, "name": "EdgepackError", "error": "WebGPU is not available here (navigator.gpu is missing)"}


# ---- the benchmark models ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bench_bundles(tmp_path_factory) -> dict[str, Path]:
    return {}


def _bench_bundle(name: str, cache: dict, tmp_path_factory) -> Path:
    if name not in cache:
        cache[name] = package(model_path(name), target="web", out=tmp_path_factory.mktemp(name) / name, verify=False,
                              dynamic=False, emit_onnx=True)
    return cache[name]


@pytest.mark.parametrize("name", BENCH_MODELS)
def test_benchmark_model_on_webgpu(page, name, bench_bundles, tmp_path_factory) -> None:
    bundle = _bench_bundle(name, bench_bundles, tmp_path_factory)
    info = page.open(bundle)
    assert "error" not in info, info
    # everything on the GPU but Winograd F(4x4)'s filter transforms, which the wasm core runs once at bind
    off = [p for p in info["placement"] if p["on"] != "gpu"]
    assert all(p["on"] == "prologue" and p["op"] == "WINOGRAD_FILTER" for p in off), off
    ref = onnx.load(str(bundle / "model.onnx"))
    for seed in (1, 2):
        feeds = _feeds(bundle, seed)
        res = page.run(feeds, with_wasm=seed == 1)
        assert "error" not in res, res
        _compare(res["gpu"], reference_run(ref, feeds), f"{name} seed {seed}")


def test_fallback_heavy_minilm(page, bench_bundles, tmp_path_factory) -> None:
    """minilm_like with its GATHER (int64 ids), ATTENTION (the fused attention blocks) and LAYERNORM nodes forced
    onto the wasm core: ~40 GPU <-> wasm hand-offs per run, same answer."""
    bundle = _bench_bundle("minilm_like", bench_bundles, tmp_path_factory)
    info = page.open(bundle, wasmOps=["GATHER", "ATTENTION", "LAYERNORM"])
    assert "error" not in info, info
    on_wasm = [p for p in info["placement"] if p["on"] == "wasm"]
    assert {p["op"] for p in on_wasm} == {"GATHER", "ATTENTION", "LAYERNORM"} and len(on_wasm) > 30
    feeds = _feeds(bundle, 5)
    res = page.run(feeds)
    assert "error" not in res, res
    _compare(res["gpu"], reference_run(onnx.load(str(bundle / "model.onnx")), feeds), "minilm_like (fallback)")


def _has_fp16_packaging() -> bool:
    import inspect
    return "quantize" in inspect.signature(package).parameters


@pytest.fixture(scope="module")
def fp16_bundles(tmp_path_factory) -> dict[str, Path]:
    return {}


@pytest.mark.skipif(not _has_fp16_packaging(), reason="fp16 bundles need the packager's --quantize fp16")
@pytest.mark.parametrize("f16_weights", [False, True])
@pytest.mark.parametrize("name", ["cifar10net", "mobilenetv2", "minilm_like"])
def test_fp16_bundle(page, name, f16_weights, fp16_bundles, tmp_path_factory) -> None:
    """Weights stored as float16, widened by prologue CAST nodes that the wasm core runs once when it binds
    its arena: the backend takes their outputs as constants, so every other node still runs on the GPU.
    f16Weights keeps them float16 in GPU memory (SwiftShader has no shader-f16: unpack2x16float reads them)."""
    if name not in fp16_bundles:
        fp16_bundles[name] = package(model_path(name), target="web", out=tmp_path_factory.mktemp(name) / name,
                                     verify=False, quantize="fp16", dynamic=False, emit_onnx=True)
    bundle = fp16_bundles[name]
    info = page.open(bundle, f16Weights=f16_weights)
    assert "error" not in info, info
    assert isinstance(info["features"]["f16"], bool) and info["features"]["f16Weights"] == f16_weights
    if f16_weights:
        full = page.open(bundle, f16Weights=False)["memory"]["weightBytes"]
        assert info["memory"]["weightBytes"] < 0.75 * full, (info["memory"], full)
        info = page.open(bundle, f16Weights=True)
    kinds = {p["op"] for p in info["placement"] if p["on"] == "prologue"}
    assert "CAST" in kinds and kinds <= {"CAST", "WINOGRAD_FILTER"}, info["placement"]
    assert all(p["on"] != "wasm" for p in info["placement"]), [p for p in info["placement"] if p["on"] == "wasm"]
    feeds = _feeds(bundle, 3)
    res = page.run(feeds)
    assert "error" not in res, res
    _compare(res["gpu"], reference_run(onnx.load(str(bundle / "model.onnx")), feeds), f"{name} fp16")


# ---- hostile plans -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_bundle(tmp_path_factory) -> Path:
    return package(CONV_CASES["conv_group_stride_relu"], out=tmp_path_factory.mktemp("small") / "b", verify=False, emit_onnx=True)


def _open_error(page, bundle: Path, plan: bytes) -> str:
    info = page.open(bundle, plan=plan)
    assert "error" in info and info["name"] == "EdgepackError", info
    return info["error"]


def test_hostile_plan_bytes_are_refused_clearly(page, small_bundle) -> None:
    good = (small_bundle / "model.plan").read_bytes()
    assert "bad magic" in _open_error(page, small_bundle, b"XXXX" + good[4:])
    assert "truncated" in _open_error(page, small_bundle, good[:40])
    assert "plan_bytes" in _open_error(page, small_bundle, good[:-64])
    n_tensors, t_off = struct.unpack_from("<I", good, 16)[0], struct.unpack_from("<I", good, 32)[0]
    bad = bytearray(good)
    struct.pack_into("<I", bad, 32, len(good) - 8)             # tensor table past the end
    assert "tensor section" in _open_error(page, small_bundle, bytes(bad))
    bad = bytearray(good)
    struct.pack_into("<I", bad, t_off + 4, 1 << 30)             # tensor 0 offset far outside the arena
    assert "tensor 0" in _open_error(page, small_bundle, bytes(bad))
    bad = bytearray(good)
    bad[t_off + 48 * (n_tensors - 1)] = 99                      # unknown dtype
    assert "unknown dtype 99" in _open_error(page, small_bundle, bytes(bad))
    n_off = struct.unpack_from("<I", good, 36)[0]
    bad = bytearray(good)
    struct.pack_into("<I", bad, n_off + 4, 1 << 20)             # node 0's io range outside the int pool
    assert "node 0 io" in _open_error(page, small_bundle, bytes(bad))


def test_plan_must_match_the_wasm_session(page, small_bundle, tmp_path) -> None:
    other = package(CONV_CASES["winograd"], out=tmp_path / "other", verify=False)
    assert "different plan" in _open_error(page, small_bundle, (other / "model.plan").read_bytes())
