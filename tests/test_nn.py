"""nn family (pooling, normalization, softmax, reductions, ConvTranspose): random shapes against
onnxruntime through the full package -> bundle -> wasm path, opset-specific semantics, and hostile plans
refused at load."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.errors import RuntimeFailure, UnsupportedError
from packager.plan import layout
from packager.plan.opcodes import Op
from packager.runtime.wasm import WasmPlan
from packager.toolchain import ensure_wasm

from .conftest import PORTABLE_AND_VECTOR

RNG = np.random.default_rng(1234)


def model(op: str, x_shape: tuple[int, ...], y_shape: tuple[int, ...] | None = None, opset: int = 17,
          inits: dict[str, np.ndarray] | None = None, extra_inputs: list[str] = (), outputs: list[str] | None = None,
          **attrs) -> onnx.ModelProto:
    inits = inits or {}
    outputs = outputs or ["y"]
    node = helper.make_node(op, ["x", *extra_inputs], outputs, **attrs)
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_empty_tensor_value_info(o) for o in outputs],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    # output types and shapes from ONNX shape inference
    inferred = {vi.name: vi for vi in onnx.shape_inference.infer_shapes(m, strict_mode=True).graph.value_info}
    inferred.update({vi.name: vi for vi in onnx.shape_inference.infer_shapes(m).graph.output if vi.type.HasField("tensor_type")})
    for o in m.graph.output:
        if o.name in inferred:
            o.CopyFrom(inferred[o.name])
    return m


def ort(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as rt
    s = rt.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def ours(m: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp: Path, variant: str) -> list[np.ndarray]:
    out = package(m, out=tmp / "b", verify=False, input_shapes={k: v.shape for k, v in feeds.items()})
    got = load_bundle(out, variant).run(feeds)
    return [got[o.name] for o in m.graph.output]


def check(m: onnx.ModelProto, x_shape: tuple[int, ...], tmp: Path, want: list[np.ndarray] | None = None,
          rtol: float = 1e-4, atol: float = 1e-5) -> None:
    x = RNG.standard_normal(x_shape).astype(np.float32)
    want = want if want is not None else ort(m, {"x": x})
    for v in PORTABLE_AND_VECTOR:
        got = ours(m, {"x": x}, tmp / v, v)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# ---- pooling ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),            # ResNet stem
    dict(kernel_shape=[2, 2], strides=[2, 2]),
    dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    dict(kernel_shape=[3, 2], strides=[1, 1], dilations=[2, 3], pads=[2, 1, 0, 1]),
    dict(kernel_shape=[3, 3], strides=[2, 1], auto_pad="SAME_UPPER"),
])
def test_maxpool_2d(tmp_path: Path, kw: dict) -> None:
    check(model("MaxPool", (2, 3, 23, 29), **kw), (2, 3, 23, 29), tmp_path)


@pytest.mark.parametrize("cip", [0, 1])
@pytest.mark.parametrize("ceil", [0, 1])
def test_averagepool(tmp_path: Path, cip: int, ceil: int) -> None:
    m = model("AveragePool", (1, 4, 15, 18), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 1],
              count_include_pad=cip, ceil_mode=ceil)
    check(m, (1, 4, 15, 18), tmp_path)


def test_pool_1d_3d(tmp_path: Path) -> None:
    check(model("MaxPool", (2, 3, 40), kernel_shape=[4], strides=[2], pads=[1, 2]), (2, 3, 40), tmp_path)
    check(model("AveragePool", (1, 2, 6, 7, 9), kernel_shape=[2, 3, 3], strides=[1, 2, 2], pads=[0, 1, 1, 1, 1, 1]),
          (1, 2, 6, 7, 9), tmp_path)
    check(model("MaxPool", (1, 2, 6, 7, 9), kernel_shape=[3, 2, 3], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 1]),
          (1, 2, 6, 7, 9), tmp_path)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_lppool(tmp_path: Path, p: int) -> None:
    check(model("LpPool", (1, 3, 11, 14), kernel_shape=[3, 3], strides=[2, 1], pads=[1, 1, 0, 1], p=p),
          (1, 3, 11, 14), tmp_path)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool(tmp_path: Path, op: str) -> None:
    check(model(op, (2, 5, 7, 7)), (2, 5, 7, 7), tmp_path)
    check(model(op, (1, 3, 3)), (1, 3, 3), tmp_path)


# ---- normalization ----------------------------------------------------------------------------------------

def test_batchnorm_folded(tmp_path: Path) -> None:
    C = 16
    inits = {"s": RNG.standard_normal(C).astype(np.float32), "b": RNG.standard_normal(C).astype(np.float32),
             "m": RNG.standard_normal(C).astype(np.float32), "v": RNG.uniform(0.5, 2, C).astype(np.float32)}
    m = model("BatchNormalization", (2, C, 9, 11), opset=15, inits=inits, extra_inputs=["s", "b", "m", "v"], epsilon=1e-3)
    check(m, (2, C, 9, 11), tmp_path)


def test_batchnorm_training_rejected(tmp_path: Path) -> None:
    C = 3
    inits = {k: np.ones(C, np.float32) for k in "sbmv"}
    m = model("BatchNormalization", (1, C, 2, 2), opset=15, inits=inits, extra_inputs=["s", "b", "m", "v"],
              outputs=["y", "rm", "rv"], training_mode=1)
    with pytest.raises(UnsupportedError, match="training_mode"):
        package(m, out=tmp_path / "b", verify=False)


def test_layernorm_transformer(tmp_path: Path) -> None:
    inits = {"g": RNG.standard_normal(384).astype(np.float32), "b": RNG.standard_normal(384).astype(np.float32)}
    m = model("LayerNormalization", (1, 9, 384), inits=inits, extra_inputs=["g", "b"], epsilon=1e-12)
    check(m, (1, 9, 384), tmp_path)


def test_layernorm_axis_broadcast_stats(tmp_path: Path) -> None:
    inits = {"g": RNG.standard_normal((1, 5)).astype(np.float32)}
    m = model("LayerNormalization", (2, 3, 4, 5), inits=inits, extra_inputs=["g"], outputs=["y", "mean", "inv"], axis=2)
    x_shape = (2, 3, 4, 5)
    x = RNG.standard_normal(x_shape).astype(np.float32)
    mean = x.mean(axis=(2, 3), keepdims=True)
    inv = 1 / np.sqrt(((x - mean) ** 2).mean(axis=(2, 3), keepdims=True) + 1e-5)
    want = [(x - mean) * inv * inits["g"], mean, inv]
    for v in PORTABLE_AND_VECTOR:
        got = ours(m, {"x": x}, tmp_path / v, v)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset,axis,shape", [(13, -1, (1, 4, 10, 128)), (13, 1, (2, 6, 5)), (13, 0, (3, 9)),
                                              (11, 1, (2, 3, 4)), (11, 0, (2, 3, 5)), (11, -1, (3, 7))])
def test_softmax(tmp_path: Path, op: str, opset: int, axis: int, shape: tuple[int, ...]) -> None:
    check(model(op, shape, opset=opset, axis=axis), shape, tmp_path)


# ---- reductions -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"])
@pytest.mark.parametrize("axes,keep", [([1], 0), ([0, 2], 1), ([-1], 1), ([1, 3], 0), (None, 0)])
def test_reduce_attr_axes(tmp_path: Path, op: str, axes: list[int] | None, keep: int) -> None:
    kw = dict(keepdims=keep) if axes is None else dict(axes=axes, keepdims=keep)
    check(model(op, (2, 3, 4, 9), opset=11, **kw), (2, 3, 4, 9), tmp_path, rtol=1e-3)


def test_reduce_input_axes_and_noop(tmp_path: Path) -> None:
    axes = np.array([0, -1], np.int64)
    check(model("ReduceMean", (3, 4, 10), opset=18, inits={"a": axes}, extra_inputs=["a"], keepdims=0), (3, 4, 10), tmp_path)
    check(model("ReduceSum", (3, 4, 10), opset=13, inits={"a": axes}, extra_inputs=["a"]), (3, 4, 10), tmp_path)
    # noop_with_empty_axes: no reduction, but the per-element part still applies (L2 -> |x|)
    x = RNG.standard_normal((2, 5)).astype(np.float32)
    m = model("ReduceL2", (2, 5), opset=18, noop_with_empty_axes=1)
    for v in PORTABLE_AND_VECTOR:
        np.testing.assert_allclose(ours(m, {"x": x}, tmp_path / v, v)[0], np.abs(x), rtol=1e-6)


# ---- ConvTranspose ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("xs,ws,kw", [
    ((1, 4, 5, 6), (4, 3, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1], group=2)),
    ((2, 3, 7, 7), (3, 2, 4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 9), (2, 3, 3), dict(dilations=[2], pads=[1, 0])),
    ((1, 2, 4, 4), (2, 2, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
])
def test_conv_transpose(tmp_path: Path, xs: tuple, ws: tuple, kw: dict) -> None:
    w = RNG.standard_normal(ws).astype(np.float32)
    cout = ws[1] * kw.get("group", 1)
    b = RNG.standard_normal(cout).astype(np.float32)
    check(model("ConvTranspose", xs, inits={"w": w, "b": b}, extra_inputs=["w", "b"], **kw), xs, tmp_path)


# ---- hostile plans ----------------------------------------------------------------------------------------

def _plan_of(m: onnx.ModelProto, tmp: Path) -> layout.Plan:
    out = package(m, out=tmp / "h", verify=False)
    return layout.decode((out / "model.plan").read_bytes())


def _opens(plan: layout.Plan) -> None:
    WasmPlan(ensure_wasm()["edgepack.wasm"], layout.encode(plan))


@pytest.mark.parametrize("m,op,mutations", [
    (model("MaxPool", (1, 2, 8, 8), kernel_shape=[2, 2], strides=[2, 2]), Op.POOL,
     [lambda p: p.__setitem__(1, 3), lambda p: p.__setitem__(4, 0), lambda p: p.__setitem__(7, -1),
      lambda p: p.__setitem__(0, 7), lambda p: p.__setitem__(4, 1 << 30), lambda p: p.__setitem__(-1, 2),
      lambda p: (p.pop(), p.pop())]),   # (one word less is the form from before ceil_mode)
    (model("GlobalAveragePool", (1, 2, 3, 3)), Op.GLOBAL_POOL, [lambda p: p.__setitem__(0, 5), lambda p: p.append(0)]),
    (model("Softmax", (2, 3, 4), opset=13), Op.SOFTMAX,
     [lambda p: p.__setitem__(2, 4), lambda p: p.__setitem__(1, 2 ** 31 - 1), lambda p: p.__setitem__(1, 3)]),
    (model("LayerNormalization", (2, 8), inits={"g": np.ones(8, np.float32)}, extra_inputs=["g"]), Op.LAYERNORM, [lambda p: p.__setitem__(0, 2), lambda p: p.__setitem__(0, -1)]),
    (model("ReduceSum", (2, 3, 4), opset=11, axes=[1]), Op.REDUCE,
     [lambda p: p.__setitem__(1, 8), lambda p: p.__setitem__(1, 1 << 4), lambda p: p.__setitem__(0, 99),
      lambda p: p.__setitem__(1, 1)]),
    (model("ConvTranspose", (1, 4, 3, 3), inits={"w": np.ones((4, 2, 3, 3), np.float32)}, extra_inputs=["w"]),
     Op.CONV_TRANSPOSE, [lambda p: p.__setitem__(1, 3), lambda p: p.__setitem__(1, 4), lambda p: p.__setitem__(2, 0),
                         lambda p: p.__setitem__(0, 1)]),
])
def test_hostile_params_rejected(tmp_path: Path, m: onnx.ModelProto, op: Op, mutations: list) -> None:
    plan = _plan_of(m, tmp_path)
    _opens(plan)   # the untouched plan is fine
    for mutate in mutations:
        p = _plan_of(m, tmp_path)
        node = next(n for n in p.nodes if n.op == op)
        mutate(node.params)
        with pytest.raises(RuntimeFailure):
            _opens(p)


def test_hostile_scratch_and_shapes_rejected(tmp_path: Path) -> None:
    m = model("MaxPool", (1, 2, 8, 8), kernel_shape=[2, 2], strides=[2, 2])
    p = _plan_of(m, tmp_path)
    node = next(n for n in p.nodes if n.op == Op.POOL)
    node.scratch_bytes = 16          # less than a row
    with pytest.raises(RuntimeFailure):
        _opens(p)
    # LayerNorm scale whose size does not match the normalized dims
    m = model("LayerNormalization", (2, 8), inits={"g": np.ones(8, np.float32)}, extra_inputs=["g"])
    p = _plan_of(m, tmp_path)
    node = next(n for n in p.nodes if n.op == Op.LAYERNORM)
    node.inputs[1] = node.inputs[0]  # X (16 elements) as scale
    with pytest.raises(RuntimeFailure):
        _opens(p)
