"""Every problem in one report (issue 18, parts 4-5; issue 20; issue 21's dim notices): `package check`, all refused
nodes at once grouped by op, and what exporters really write (-1/0 dims, IR 3 initializers listed as inputs, old
opsets, constants too large to fold, unused optional outputs under --no-optimize). Each packaging test runs the
bundle in the real runtime and compares it with onnxruntime."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.errors import PackagerError, UnsupportedError, UnsupportedErrors

from .conftest import REPO, f32, make_model


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "packager.cli", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=300)


def _ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.ir_version = min(m.ir_version, 10)
    for vi in [*m.graph.input, *m.graph.output]:   # onnxruntime reads a dim_value 0 as a fixed 0
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_value") and d.dim_value <= 0:
                d.dim_param = "any"
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _four_unsupported() -> onnx.ModelProto:
    """Four nodes of three ops edgepack refuses by their nature, not for a kernel nobody wrote yet (a later session
    may add one: Shrink, Hardmax, NonZero and Unique all got theirs): random draws, which no run could check against
    onnxruntime. RandomNormalLike twice, Bernoulli (reading refused nodes' outputs), Multinomial, between supported
    nodes."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("RandomNormalLike", ["a"], ["r1"], name="random_1"),
             helper.make_node("RandomNormalLike", ["x"], ["r2"], name="random_2", seed=1.0),
             helper.make_node("Add", ["r1", "r2"], ["s"], name="add"),
             helper.make_node("Bernoulli", ["s"], ["b"], name="bernoulli_1"),
             helper.make_node("Multinomial", ["a"], ["m"], name="multinomial_1", sample_size=2)]
    return make_model(nodes, [f32("x", [2, 3])],
                      [f32("b", [2, 3]), helper.make_tensor_value_info("m", TensorProto.INT32, [2, 2])])


REFUSED = {"RandomNormalLike": ["random_1", "random_2"], "Bernoulli": ["bernoulli_1"], "Multinomial": ["multinomial_1"]}


def test_every_unsupported_node_in_one_error(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedErrors) as e:
        package(_four_unsupported(), "web", tmp_path / "b", verify=False)
    text = str(e.value)
    first = text.splitlines()[0]
    assert first.startswith("unsupported: 4 nodes of 3 ops") and "opset 17" in first, text
    for op, nodes in REFUSED.items():
        assert op in first, text
        for node in nodes:
            assert f"'{node}'" in text, text
    # grouped: one line per op, both RandomNormalLike nodes on it; Bernoulli, reading refused nodes' outputs, named too
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("RandomNormalLike"))
    assert "x2" in line and "'random_1'" in line and "'random_2'" in line
    assert isinstance(e.value, UnsupportedError)   # callers catching the single error still catch it
    assert not (tmp_path / "b").exists()


def test_check_verb_lists_every_node_and_exit_status(tmp_path: Path) -> None:
    p = tmp_path / "four.onnx"
    onnx.save(_four_unsupported(), p)
    r = _cli("check", str(p), "--target", "web")
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert "target   web: cannot package (4 nodes it cannot run)" in r.stdout, r.stdout
    for op in REFUSED:
        assert f"{op} (opset 17)" in r.stdout
    assert "nodes: 'random_1', 'random_2'" in r.stdout
    assert not (tmp_path / "four.bundle").exists()   # check never packages

    ok = tmp_path / "ok.onnx"
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [f32("x", ["batch", -1, 0])], [f32("y", ["batch", -1, 0])])
    onnx.save(m, ok)
    r = _cli("check", str(ok))
    assert r.returncode == 0, r.stdout + r.stderr
    for t in ("web", "pi5", "android"):
        assert f"target   {t}: packages" in r.stdout
    # the symbolic dims, each as the model writes it
    assert "axis 0: 'batch'" in r.stdout and "axis 1: dim_value -1" in r.stdout and "axis 2: dim_value 0" in r.stdout


def test_package_help_lists_check() -> None:
    r = _cli("--help")
    assert r.returncode == 0 and "package check MODEL" in r.stdout.replace("\n", " ")


def test_check_refused_load_is_reported(tmp_path: Path) -> None:
    p = tmp_path / "bad.onnx"
    p.write_bytes(b"not a model")
    r = _cli("check", str(p))
    assert r.returncode == 1 and "refused" in r.stdout and "Traceback" not in r.stderr


def test_minus_one_and_zero_dims_are_symbolic(tmp_path: Path) -> None:
    """An OCR exporter writes -1 for 'any width': --input-shape fixes it (it used to be refused), and without it the
    notice names what the model wrote and what was done."""
    m = make_model([helper.make_node("Sigmoid", ["x"], ["y"])], [f32("x", [1, 3, -1, 0])], [f32("y", [1, 3, -1, 0])])
    logs: list[str] = []
    b = package(m, "web", tmp_path / "b", input_shapes={"x": (1, 3, 8, 5)}, log=logs.append)
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 5)).astype(np.float32)
    got = load_bundle(b).run({"x": x})["y"]
    np.testing.assert_allclose(got, _ort(m, {"x": x})[0], rtol=1e-5, atol=1e-6)

    logs.clear()   # --static: the dims are set to 1, and the notice says what the model wrote
    b = package(m, "web", tmp_path / "c", log=logs.append, dynamic=False)
    notes = [ln for ln in logs if ln.startswith("notice: input 'x'")]
    assert any("symbolic dimension written as dim_value -1 set to 1 (axis 2; a dim_value <= 0 is read as any size"
               in n for n in notes), logs
    assert any("symbolic dimension written as dim_value 0 set to 1 (axis 3;" in n for n in notes), logs
    assert not any("'?'" in n for n in notes)
    x1 = x[:, :, :1, :1].copy()
    np.testing.assert_allclose(load_bundle(b).run({"x": x1})["y"], _ort(m, {"x": x1})[0], rtol=1e-5, atol=1e-6)

    # the default: both dims resolved at run time, one bundle for any size, and the notice says so
    logs.clear()
    b = package(m, "web", tmp_path / "d", log=logs.append)
    for k, v in ((2, -1), (3, 0)):
        assert any(f"input 'x': dimension written as dim_value {v} (axis {k}) read as any size: resolved at run time "
                   f"as 'x_{k}'" in n for n in logs), logs
    for shape in ((1, 3, 8, 5), (1, 3, 2, 7)):
        xs = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(load_bundle(b).run({"x": xs})["y"], _ort(m, {"x": xs})[0], rtol=1e-5, atol=1e-6)


def test_ir3_initializers_listed_as_inputs_are_weights(tmp_path: Path) -> None:
    """IR < 4: every initializer is also a graph input. They are weights of the bundle, not inputs."""
    w = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "ir3", [f32("x", [2, 3]), f32("w", [3, 4])],
                          [f32("y", [2, 4])], [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)])
    m.ir_version = 3
    b = package(m, "web", tmp_path / "b")
    bundle = load_bundle(b)
    assert [s["name"] for s in bundle.inputs] == ["x"]
    x = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(bundle.run({"x": x})["y"], x @ w, rtol=1e-5, atol=1e-5)


def test_old_opset_converted(tmp_path: Path) -> None:
    """Opset 9: Unsqueeze/Squeeze and Slice with attributes, Softmax on a flattened 2-D view, converted by
    onnx.version_converter; Upsample is kept as written (the converter's Resize 10 -> 11 step changes meaning)."""
    nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0]),
             helper.make_node("Squeeze", ["u"], ["s"], axes=[0]),
             helper.make_node("Softmax", ["s"], ["sm"], axis=1),
             helper.make_node("Slice", ["sm"], ["y"], starts=[1], ends=[3], axes=[2])]
    g = helper.make_graph(nodes, "old", [f32("x", [1, 2, 3, 4])], [f32("y", [1, 2, 2, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
    m.ir_version = 4
    logs: list[str] = []
    b = package(m, "web", tmp_path / "b", log=logs.append)
    assert any("opset 9 converted to opset 13" in ln for ln in logs), logs
    x = np.random.default_rng(3).standard_normal((1, 2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(load_bundle(b).run({"x": x})["y"], _ort(m, {"x": x})[0], rtol=1e-5, atol=1e-6)

    scales = numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "scales")
    g = helper.make_graph([helper.make_node("Upsample", ["x", "scales"], ["y"], mode="linear")], "up",
                          [f32("x", [1, 2, 3, 4])], [f32("y", [1, 2, 6, 12])], [scales])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
    m.ir_version = 4
    logs.clear()
    b = package(m, "web", tmp_path / "c", log=logs.append)
    assert any("not converted" in ln and "Upsample" in ln for ln in logs), logs
    np.testing.assert_allclose(load_bundle(b).run({"x": x})["y"], _ort(m, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_constant_of_shape_weight_and_too_large(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exporters write weights as ConstantOfShape of constant dims: folded into a weight; past the limit, refused
    naming the size and the limit (never 'no edgepack kernel')."""
    import packager.analyze as an
    shape = numpy_helper.from_array(np.array([3, 4], np.int64), "shape")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["w"], name="w_fill",
                              value=numpy_helper.from_array(np.array([0.5], np.float32))),
             helper.make_node("MatMul", ["x", "w"], ["y"])]
    m = make_model(nodes, [f32("x", [2, 3])], [f32("y", [2, 4])], [shape])
    b = package(m, "web", tmp_path / "b")
    x = np.random.default_rng(4).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(load_bundle(b).run({"x": x})["y"], _ort(m, {"x": x})[0], rtol=1e-5, atol=1e-6)
    monkeypatch.setattr(an, "WEIGHT_LIMIT_BYTES", 16)
    with pytest.raises(PackagerError) as e:
        package(m, "web", tmp_path / "c", verify=False)
    assert "ConstantOfShape (node 'w_fill'" in str(e.value) and "folding limit" in str(e.value)
    assert "no edgepack kernel" not in str(e.value)


def test_no_optimize_never_stricter(tmp_path: Path) -> None:
    """Dropout's mask output, unread: the optimizer strips it, and --no-optimize packages it too."""
    nodes = [helper.make_node("Dropout", ["x"], ["d", "mask"], name="drop"), helper.make_node("Relu", ["d"], ["y"])]
    m = make_model(nodes, [f32("x", [2, 3])], [f32("y", [2, 3])], opset=13)
    x = np.random.default_rng(5).standard_normal((2, 3)).astype(np.float32)
    for opt in (True, False):
        b = package(m, "web", tmp_path / f"b{opt}", optimize=opt)
        np.testing.assert_allclose(load_bundle(b).run({"x": x})["y"], _ort(m, {"x": x})[0], rtol=1e-6)


def test_check_sees_contrib_ops_as_package_does(tmp_path):
    """A com.microsoft op that package() rewrites (FastGelu) is not reported as unsupported by `package check`."""
    g = helper.make_graph([helper.make_node("FastGelu", ["x"], ["y"], domain="com.microsoft")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    onnx.save(m, tmp_path / "fastgelu.onnx")
    r = _cli("check", str(tmp_path / "fastgelu.onnx"))
    assert r.returncode == 0, r.stderr
    assert "(opset 17, 1 nodes)" in r.stdout and "web: packages" in r.stdout
