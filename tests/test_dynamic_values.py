"""Values a kernel uses, fed at run time (issue 18): Conv's weights (the general and the depthwise path), Clip's
bounds, QuantizeLinear / DequantizeLinear's scale and zero point as graph inputs, and an input dim the model writes
as 0 fed empty. Each model is packaged with run-time shapes (package(..., dynamic=True)), run under wasmtime (SIMD
and scalar builds) and in Node, and compared with onnxruntime; constant weights keep their packed fast path; bad
run-time inputs are refused with a clear error."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.errors import InputError, PackagerError
from packager.plan import layout
from packager.plan.opcodes import Op

from .test_web_dynamic import _node_runs, _outputs
from .test_web_node import _node_major

F, U8, I8 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8


def _model(nodes, inputs, outputs, inits=(), opset: int = 21) -> onnx.ModelProto:
    m = helper.make_model(helper.make_graph(nodes, "values", inputs, outputs, list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def _reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def _conv(group: int, cin: int, cout: int, k: int, **attrs) -> onnx.ModelProto:
    """x[batch, cin, 9, 11] * W[cout, cin/group, k, k] + B, W and B graph inputs."""
    return _model([helper.make_node("Conv", ["x", "W", "B"], ["y"], group=group, **attrs)],
                  [helper.make_tensor_value_info("x", F, ["batch", cin, 9, 11]),
                   helper.make_tensor_value_info("W", F, [cout, cin // group, k, k]),
                   helper.make_tensor_value_info("B", F, [cout])],
                  [helper.make_tensor_value_info("y", F, ["batch", cout, "h", "w"])])


def _clip() -> onnx.ModelProto:
    return _model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                  [helper.make_tensor_value_info("x", F, ["n", 5]), helper.make_tensor_value_info("lo", F, []),
                   helper.make_tensor_value_info("hi", F, [])],
                  [helper.make_tensor_value_info("y", F, ["n", 5])])


def _qdq() -> onnx.ModelProto:
    """y = DequantizeLinear(QuantizeLinear(x, s, z), s2, z2) per channel (axis 1), every scale and zero point fed."""
    return _model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
                   helper.make_node("DequantizeLinear", ["q", "s2", "z2"], ["y"], axis=1)],
                  [helper.make_tensor_value_info("x", F, ["n", 3, 4]), helper.make_tensor_value_info("s", F, [3]),
                   helper.make_tensor_value_info("z", U8, [3]), helper.make_tensor_value_info("s2", F, [3]),
                   helper.make_tensor_value_info("z2", U8, [3])],
                  [helper.make_tensor_value_info("q", U8, ["n", 3, 4]), helper.make_tensor_value_info("y", F, ["n", 3, 4])])


def _feeds(model: onnx.ModelProto, rng: np.random.Generator, sym: int) -> dict[str, np.ndarray]:
    out = {}
    for vi in model.graph.input:
        shape = [d.dim_value if d.HasField("dim_value") else sym for d in vi.type.tensor_type.shape.dim]
        dt = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        out[vi.name] = rng.integers(0, 255, shape).astype(dt) if dt == np.uint8 else \
            rng.standard_normal(shape).astype(dt)
    return out


CASES = {
    # general CONV path: 5 output rows per group (not a whole panel of 6), a 3x3 stride-1 window (Winograd with
    # constant weights), padding
    "conv_groups": lambda: _conv(2, 4, 10, 3, pads=[1, 1, 1, 1]),
    "conv_strided": lambda: _conv(1, 3, 7, 2, strides=[2, 1], dilations=[1, 2]),
    "conv_depthwise": lambda: _conv(4, 4, 4, 3, pads=[0, 1, 0, 1]),
}


def _bundles(tmp: Path, name: str, model: onnx.ModelProto) -> Path:
    return package(model, target="web", out=tmp / name, dynamic=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_weights_fed_at_run_time(tmp_path: Path, name: str) -> None:
    m = CASES[name]()
    out = _bundles(tmp_path, name, m)
    plan = layout.decode((out / "model.plan").read_bytes())
    assert plan.dynamic is not None
    assert not plan.weights, "a weight fed at run time is packed by the plan's kernels, not stored"
    rng = np.random.default_rng(3)
    runs = [_feeds(m, rng, n) for n in (1, 3)]
    for variant in ("simd", "scalar"):
        b = load_bundle(out, variant)
        for feeds in runs:
            want = _reference(m, feeds)["y"]
            np.testing.assert_allclose(b.run(feeds)["y"], want, rtol=1e-4, atol=1e-5)
    if _node_major() >= 20:
        res = _node_runs(tmp_path / "node", out, runs)
        for feeds, run in zip(runs, res["runs"]):
            np.testing.assert_allclose(_outputs(run)["y"], _reference(m, feeds)["y"], rtol=1e-4, atol=1e-5)


def test_constant_conv_weights_keep_their_packed_path(tmp_path: Path) -> None:
    m = _conv(2, 4, 10, 3, pads=[1, 1, 1, 1])
    w = np.random.default_rng(4).standard_normal((10, 2, 3, 3)).astype(np.float32)
    m.graph.initializer.append(numpy_helper.from_array(w, "W"))
    del m.graph.input[1]
    out = package(m, target="web", out=tmp_path / "b", dynamic=True)
    ops = {Op(n.op).name for n in layout.decode((out / "model.plan").read_bytes()).nodes}
    assert ops.isdisjoint({"PAD", "TRANSPOSE"}), ops   # packed at package time, nothing packs at run time


def test_a_wrong_weight_shape_is_refused(tmp_path: Path) -> None:
    m = CASES["conv_groups"]()
    b = load_bundle(_bundles(tmp_path, "c", m))
    feeds = _feeds(m, np.random.default_rng(5), 2)
    feeds["W"] = feeds["W"][:, :, :2]
    with pytest.raises(InputError, match=r"input 'W': shape \[10, 2, 2, 3\], expected \[10, 2, 3, 3\]"):
        b.run(feeds)


def test_clip_bounds_fed_at_run_time(tmp_path: Path) -> None:
    m = _clip()
    out = _bundles(tmp_path, "clip", m)
    x = np.array([[-3, -0.5, 0, 0.5, np.nan], [2, 7, -7, 1, 0.25]], np.float32)
    runs = [{"x": x, "lo": np.array(-1, np.float32), "hi": np.array(1, np.float32)},
            {"x": x[:1], "lo": np.array(0.3, np.float32), "hi": np.array(0.1, np.float32)},   # lo > hi: every y is hi
            {"x": x, "lo": np.array(-np.inf, np.float32), "hi": np.array(0, np.float32)}]
    for variant in ("simd", "scalar"):
        b = load_bundle(out, variant)
        for feeds in runs:
            np.testing.assert_array_equal(b.run(feeds)["y"], _reference(m, feeds)["y"])
    if _node_major() >= 20:
        for feeds, run in zip(runs, _node_runs(tmp_path / "node", out, runs)["runs"]):
            np.testing.assert_array_equal(_outputs(run)["y"], _reference(m, feeds)["y"])


def test_clip_bounds_must_be_scalars(tmp_path: Path) -> None:
    m = _clip()
    m.graph.input[1].type.tensor_type.shape.dim.add().dim_value = 2
    with pytest.raises(PackagerError, match=r"Clip .*min/max must be scalars \('lo' has shape \[2\]\)"):
        package(m, target="web", out=tmp_path / "b", dynamic=True)


def test_quantize_scales_and_zero_points_fed_at_run_time(tmp_path: Path) -> None:
    m = _qdq()
    out = _bundles(tmp_path, "qdq", m)
    rng = np.random.default_rng(6)
    runs = []
    for n in (1, 4):
        runs.append({"x": (rng.standard_normal((n, 3, 4)) * 3).astype(np.float32),
                     "s": np.array([0.02, 0.5, 0.1], np.float32), "z": np.array([128, 3, 250], np.uint8),
                     "s2": np.array([0.03, 0.25, 1.0], np.float32), "z2": rng.integers(0, 255, 3).astype(np.uint8)})
    for variant in ("simd", "scalar"):
        b = load_bundle(out, variant)
        for feeds in runs:
            got, want = b.run(feeds), _reference(m, feeds)
            np.testing.assert_array_equal(got["q"], want["q"])
            np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)
    if _node_major() >= 20:
        for feeds, run in zip(runs, _node_runs(tmp_path / "node", out, runs)["runs"]):
            got, want = _outputs(run), _reference(m, feeds)
            np.testing.assert_array_equal(got["q"], want["q"])


def test_a_zero_point_of_another_dtype_is_refused(tmp_path: Path) -> None:
    m = _qdq()
    m.graph.input[4].type.tensor_type.elem_type = I8
    with pytest.raises(PackagerError, match=r"DequantizeLinear .*'z2' fed at run time has dtype int8, not uint8"):
        package(m, target="web", out=tmp_path / "b", dynamic=True)


def test_a_dim_written_as_zero_may_be_fed_empty(tmp_path: Path) -> None:
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", F, [0, 3])],
               [helper.make_tensor_value_info("y", F, [0, 3])])
    b = load_bundle(package(m, target="web", out=tmp_path / "b", dynamic=True))
    assert b.manifest["dims"]["x_0"]["min"] == 0
    for n in (0, 2):
        x = np.linspace(-1, 1, 3 * n, dtype=np.float32).reshape(n, 3)
        np.testing.assert_array_equal(b.run({"x": x})["y"], np.maximum(x, 0))


def _conv_integer(cin: int = 3, k: int = 3) -> onnx.ModelProto:
    """ConvInteger with w and both zero points fed (onnxruntime takes only a per-tensor w zero point; the
    conformance case test_convinteger_with_padding has a per-channel one), then MatMulInteger with b's per-column
    zero point fed: both through float32, exact for these sizes."""
    return _model([helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1]),
                   helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["z"])],
                  [helper.make_tensor_value_info("x", U8, ["n", cin, 6, 5]), helper.make_tensor_value_info("w", U8, [4, cin, k, k]),
                   helper.make_tensor_value_info("xz", U8, []), helper.make_tensor_value_info("wz", U8, []),
                   helper.make_tensor_value_info("a", U8, ["m", 7]), helper.make_tensor_value_info("b", U8, [7, 5]),
                   helper.make_tensor_value_info("az", U8, []), helper.make_tensor_value_info("bz", U8, [5])],
                  [helper.make_tensor_value_info("y", TensorProto.INT32, ["n", 4, 6, 5]),
                   helper.make_tensor_value_info("z", TensorProto.INT32, ["m", 5])])


def test_integer_conv_and_matmul_with_run_time_weights(tmp_path: Path) -> None:
    m = _conv_integer()
    out = _bundles(tmp_path, "ci", m)
    rng = np.random.default_rng(7)
    runs = [_feeds(m, rng, n) for n in (1, 2)]
    for variant in ("simd", "scalar"):
        b = load_bundle(out, variant)
        for feeds in runs:
            got, want = b.run(feeds), _reference(m, feeds)
            for k in ("y", "z"):
                np.testing.assert_array_equal(got[k], want[k])


def test_integer_conv_too_deep_for_exact_float_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PackagerError, match=r"ConvInteger .*288 products per output: more than the 258"):
        package(_conv_integer(cin=32), target="web", out=tmp_path / "b", dynamic=True)


def _recurrent(op: str, gates: int, hidden: int = 5, inputs: int = 3, **attrs) -> onnx.ModelProto:
    """op over X[seq, batch, inputs] in both directions with W, R, B (and LSTM's P) graph inputs."""
    names = ["X", "W", "R", "B", "", "", ""] + (["P"] if op == "LSTM" else [])
    ins = [helper.make_tensor_value_info("X", F, ["seq", "batch", inputs]),
           helper.make_tensor_value_info("W", F, [2, gates * hidden, inputs]),
           helper.make_tensor_value_info("R", F, [2, gates * hidden, hidden]),
           helper.make_tensor_value_info("B", F, [2, 2 * gates * hidden])]
    if op == "LSTM":
        ins.append(helper.make_tensor_value_info("P", F, [2, 3 * hidden]))
    else:
        names = names[:4]
    return _model([helper.make_node(op, names, ["Y", "Yh"], hidden_size=hidden, direction="bidirectional", **attrs)],
                  ins, [helper.make_tensor_value_info("Y", F, ["seq", 2, "batch", hidden]),
                        helper.make_tensor_value_info("Yh", F, [2, "batch", hidden])])


@pytest.mark.parametrize("name,model", [
    ("gru", lambda: _recurrent("GRU", 3)),
    ("gru_linear_before_reset", lambda: _recurrent("GRU", 3, linear_before_reset=1)),
    ("lstm_peepholes", lambda: _recurrent("LSTM", 4, hidden=17)),   # R^T's panels padded past 16 columns
    ("rnn", lambda: _recurrent("RNN", 1)),
])
def test_recurrent_weights_fed_at_run_time(tmp_path: Path, name: str, model) -> None:
    m = model()
    out = _bundles(tmp_path, name, m)
    rng = np.random.default_rng(8)
    runs = [_feeds(m, rng, n) for n in (2, 3)]
    for variant in ("simd", "scalar"):
        b = load_bundle(out, variant)
        for feeds in runs:
            got, want = b.run(feeds), _reference(m, feeds)
            for k in ("Y", "Yh"):
                np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5)
    if _node_major() >= 20:
        for feeds, run in zip(runs, _node_runs(tmp_path / "node", out, runs)["runs"]):
            np.testing.assert_allclose(_outputs(run)["Y"], _reference(m, feeds)["Y"], rtol=1e-4, atol=1e-5)


def test_qlinear_matmul_scales_fed_at_run_time(tmp_path: Path) -> None:
    names = ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]
    types = [U8, F, U8, U8, F, U8, F, U8]
    shapes = [["m", 6], [], [], [6, 5], [], [], [], []]
    m = _model([helper.make_node("QLinearMatMul", names, ["y"])],
               [helper.make_tensor_value_info(n, t, s) for n, t, s in zip(names, types, shapes)],
               [helper.make_tensor_value_info("y", U8, ["m", 5])])
    out = _bundles(tmp_path, "qmm", m)
    rng = np.random.default_rng(9)
    for variant in ("simd", "scalar"):
        b = load_bundle(out, variant)
        for rows in (1, 4):
            feeds = {"a": rng.integers(0, 255, (rows, 6)).astype(np.uint8), "b": rng.integers(0, 255, (6, 5)).astype(np.uint8),
                     "as": np.array(0.0173, np.float32), "bs": np.array(0.0091, np.float32), "ys": np.array(0.37, np.float32),
                     "az": np.array(131, np.uint8), "bz": np.array(120, np.uint8), "yz": np.array(97, np.uint8)}
            np.testing.assert_array_equal(b.run(feeds)["y"], _reference(m, feeds)["y"])
