"""Value inputs (issue 18): graph inputs whose values decide shapes (Reshape's shape, Reduce's axes, TopK's k,
Expand's shape, Range's bounds, Unsqueeze's axes, OneHot's depth, Slice's starts/ends/axes/steps, Pad's pads/axes,
Split's sizes, CumSum's axis, Tile's repeats, a window's size, CenterCropPad's shape) fed at run time, and Trilu's k (no shape: a mask made per run). Each model is packaged as it comes
(package(..., dynamic=True): a version-2 plan whose value inputs live in the values region), then run with
different values on successive runs of one session (the core re-resolves when only values change) under wasmtime
(SIMD and scalar builds), in Node and with edgepack-run under qemu-aarch64, each compared with onnxruntime. Values
that give no valid shape are a clear error naming the input, never a crash."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from packager import load_bundle, package
from packager.errors import InputError
from packager.plan import layout
from packager.targets import edge as E

from .test_edge_dynamic import java_case, run_dynamic_session_test
from .test_web_dynamic import _node_runs, _outputs
from .test_web_node import _node_major

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(node: onnx.NodeProto, inputs: list, outputs: list, opset: int = 18) -> onnx.ModelProto:
    m = helper.make_model(helper.make_graph([node], "values", inputs, outputs),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name: str, dtype: int, dims: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, dims)


def _reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


X = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
i64 = lambda *v: np.array(v, np.int64)   # noqa: E731

# name -> (model, successive runs' feeds)
CASES = {
    "reshape": (lambda: _model(helper.make_node("Reshape", ["x", "s"], ["y"]), [_vi("x", F, [2, 3, 4]), _vi("s", I64, [2])],
                               [_vi("y", F, ["a", "b"])]),
                [{"x": X, "s": i64(6, 4)}, {"x": X, "s": i64(-1, 2)}, {"x": X, "s": i64(0, 12)}]),
    "reduce_sum": (lambda: _model(helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0),
                                  [_vi("x", F, [2, 3, 4]), _vi("axes", I64, [1])], [_vi("y", F, ["a", "b"])]),
                   [{"x": X, "axes": i64(1)}, {"x": X, "axes": i64(-1)}, {"x": X, "axes": i64(0)}]),
    "reduce_l2_keepdims": (lambda: _model(helper.make_node("ReduceL2", ["x", "axes"], ["y"]),
                                          [_vi("x", F, [2, 3, 4]), _vi("axes", I64, [2])], [_vi("y", F, ["a", "b", "c"])]),
                           [{"x": X, "axes": i64(0, 2)}, {"x": X, "axes": i64(1, 2)}]),
    "topk": (lambda: _model(helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=2),
                            [_vi("x", F, [2, 3, 4]), _vi("k", I64, [1])], [_vi("v", F, [2, 3, "k"]), _vi("i", I64, [2, 3, "k"])]),
             [{"x": X, "k": i64(2)}, {"x": X, "k": i64(4)}]),
    "expand": (lambda: _model(helper.make_node("Expand", ["x", "s"], ["y"]), [_vi("x", F, [3, 1]), _vi("s", I64, [3])],
                              [_vi("y", F, ["a", "b", "c"])]),
               [{"x": X[0, :, :1].copy(), "s": i64(2, 1, 5)}, {"x": X[0, :, :1].copy(), "s": i64(1, 3, 2)}]),
    "range": (lambda: _model(helper.make_node("Range", ["a", "b", "d"], ["y"]),
                             [_vi("a", I64, []), _vi("b", I64, []), _vi("d", I64, [])], [_vi("y", I64, ["n"])]),
              [{"a": i64(1).reshape(()), "b": i64(9).reshape(()), "d": i64(2).reshape(())},
               {"a": i64(5).reshape(()), "b": i64(-3).reshape(()), "d": i64(-3).reshape(())}]),
    "unsqueeze": (lambda: _model(helper.make_node("Unsqueeze", ["x", "axes"], ["y"]),
                                 [_vi("x", F, [2, 3, 4]), _vi("axes", I64, [2])], [_vi("y", F, ["a", "b", "c", "d", "e"])]),
                  [{"x": X, "axes": i64(0, 4)}, {"x": X, "axes": i64(1, -1)}]),
    "onehot": (lambda: _model(helper.make_node("OneHot", ["i", "depth", "v"], ["y"], axis=1),
                              [_vi("i", I64, [2, 3]), _vi("depth", F, []), _vi("v", F, [2])], [_vi("y", F, [2, "d", 3])]),
               [{"i": i64(0, 2, -1, 4, 1, -5).reshape(2, 3), "depth": np.array(5.7, np.float32), "v": np.array([0, 3], np.float32)},
                {"i": i64(0, 2, -1, 4, 1, -5).reshape(2, 3), "depth": np.array(3, np.float32), "v": np.array([1, 2], np.float32)}]),
    "slice": (lambda: _model(helper.make_node("Slice", ["x", "b", "e", "a", "s"], ["y"]),
                             [_vi("x", F, [2, 3, 4]), _vi("b", I64, [2]), _vi("e", I64, [2]), _vi("a", I64, [2]),
                              _vi("s", I64, [2])], [_vi("y", F, ["a", "b", "c"])]),
              [{"x": X, "b": i64(0, 1), "e": i64(2, 4), "a": i64(1, 2), "s": i64(1, 2)},
               {"x": X, "b": i64(-1, 2**40), "e": i64(-2**40, 0), "a": i64(-1, 0), "s": i64(-2, -1)},
               {"x": X, "b": i64(3, 0), "e": i64(3, 9), "a": i64(2, 1), "s": i64(1, 1)}]),   # an empty axis
    "slice_starts_ends": (lambda: _model(helper.make_node("Slice", ["x", "b", "e"], ["y"]),
                                         [_vi("x", F, [2, 3, 4]), _vi("b", I64, [1]), _vi("e", I64, [1])],
                                         [_vi("y", F, ["a", 3, 4])]),
                          [{"x": X, "b": i64(1), "e": i64(2)}, {"x": X, "b": i64(0), "e": i64(-1)}]),
    "pad": (lambda: _model(helper.make_node("Pad", ["x", "p", "v"], ["y"]),
                           [_vi("x", F, [2, 3, 4]), _vi("p", I64, [6]), _vi("v", F, [])], [_vi("y", F, ["a", "b", "c"])]),
            [{"x": X, "p": i64(0, 1, 2, 1, 0, 3), "v": np.array(1.5, np.float32)},
             {"x": X, "p": i64(1, -1, 0, 0, 0, -2), "v": np.array(-7, np.float32)}]),
    "pad_reflect_axes": (lambda: _model(helper.make_node("Pad", ["x", "p", "", "a"], ["y"], mode="reflect"),
                                        [_vi("x", F, [2, 3, 4]), _vi("p", I64, [2]), _vi("a", I64, [1])],
                                        [_vi("y", F, [2, "b", "c"])]),
                         [{"x": X, "p": i64(2, 1), "a": i64(-1)}, {"x": X, "p": i64(1, 2), "a": i64(1)}]),
    "split": (lambda: _model(helper.make_node("Split", ["x", "s"], ["y0", "y1"], axis=2),
                             [_vi("x", F, [2, 3, 4]), _vi("s", I64, [2])], [_vi("y0", F, [2, 3, "a"]), _vi("y1", F, [2, 3, "b"])]),
              [{"x": X, "s": i64(1, 3)}, {"x": X, "s": i64(4, 0)}, {"x": X, "s": i64(2, 2)}]),
    "cumsum": (lambda: _model(helper.make_node("CumSum", ["x", "a"], ["y"], exclusive=1),
                              [_vi("x", F, [2, 3, 4]), _vi("a", I64, [])], [_vi("y", F, [2, 3, 4])]),
               [{"x": X, "a": i64(1).reshape(())}, {"x": X, "a": i64(-1).reshape(())}, {"x": X, "a": i64(0).reshape(())}]),
    "tile": (lambda: _model(helper.make_node("Tile", ["x", "r"], ["y"]), [_vi("x", F, [2, 3, 4]), _vi("r", I64, [3])],
                            [_vi("y", F, ["a", "b", "c"])]),
             [{"x": X, "r": i64(1, 2, 3)}, {"x": X, "r": i64(2, 1, 1)}, {"x": X, "r": i64(1, 0, 2)}]),
    # a window function's size fed at run time: the op is expanded to its ONNX body (its Range reads the size)
    "hann": (lambda: _model(helper.make_node("HannWindow", ["n"], ["y"], periodic=0), [_vi("n", I64, [])],
                            [_vi("y", F, ["n"])], opset=17),
             [{"n": i64(10).reshape(())}, {"n": i64(3).reshape(())}]),
    "center_crop_pad": (lambda: _model(helper.make_node("CenterCropPad", ["x", "s"], ["y"], axes=[1, 2]),
                                       [_vi("x", F, [2, 3, 4]), _vi("s", I64, [2])], [_vi("y", F, [2, "b", "c"])]),
                        [{"x": X, "s": i64(5, 2)}, {"x": X, "s": i64(1, 7)}, {"x": X, "s": i64(3, 4)}]),
    "reduce_max_bool": (lambda: _model(helper.make_node("ReduceMax", ["x", "axes"], ["y"], keepdims=1),
                                       [_vi("x", TensorProto.BOOL, [2, 3, 4]), _vi("axes", I64, [1])],
                                       [_vi("y", TensorProto.BOOL, ["a", "b", "c"])], opset=20),   # any()
                        [{"x": X > 0.8, "axes": i64(2)}, {"x": X > 0.8, "axes": i64(0)}]),
    # k is no shape: a mask computed at run time from col - row and k (BINARY, WHERE), in any plan
    "trilu": (lambda: _model(helper.make_node("Trilu", ["x", "k"], ["y"], upper=0), [_vi("x", F, [2, 3, 4]), _vi("k", I64, [])],
                             [_vi("y", F, [2, 3, 4])]),
              [{"x": X, "k": i64(0).reshape(())}, {"x": X, "k": i64(-1).reshape(())}, {"x": X, "k": i64(2).reshape(())}]),
}


_BUNDLES: dict[tuple[str, str], Path] = {}


def _bundle(tmp: Path, name: str, target: str = "web") -> Path:
    """Packaged once per test module (the bad-value tests reuse the bundles the run tests made)."""
    if (name, target) not in _BUNDLES:
        _BUNDLES[name, target] = package(CASES[name][0](), target=target, out=tmp / f"{name}_{target}", dynamic=True)
    return _BUNDLES[name, target]


@pytest.mark.parametrize("name", list(CASES))
def test_values_fed_at_run_time(tmp_path: Path, name: str) -> None:
    make, runs = CASES[name]
    m, out = make(), _bundle(tmp_path, name)
    plan = layout.decode((out / "model.plan").read_bytes())
    if name != "trilu":   # a value input, not an arena tensor
        assert any(plan.tensors[i].storage == layout.VALUES for i in plan.inputs)
    for variant in ("simd", "scalar"):
        b = load_bundle(out, variant)   # one session: every run after the first re-resolves for new values only
        for feeds in runs:
            got, want = b.run(feeds), _reference(m, feeds)
            for k, w in want.items():
                assert got[k].shape == w.shape, (variant, feeds, k)
                np.testing.assert_allclose(got[k], w, rtol=1e-5, atol=1e-6)
    if _node_major() >= 20 and name in ("reshape", "reduce_sum", "topk", "slice", "pad"):
        for feeds, run in zip(runs, _node_runs(tmp_path / "node", out, runs)["runs"]):
            for k, w in _reference(m, feeds).items():
                np.testing.assert_allclose(_outputs(run)[k], w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, feeds, says", [
    ("reshape", {"x": X, "s": i64(5, 5)}, r"input values 's' = \[5, 5\] decide shapes"),
    ("reduce_sum", {"x": X, "axes": i64(3)}, r"input values 'axes' = \[3\] decide shapes"),
    ("topk", {"x": X, "k": i64(5)}, r"input values 'k' = \[5\] decide shapes"),
    ("expand", {"x": X[0, :, :1].copy(), "s": i64(2, 4, 5)}, r"input values 's'"),
    ("range", {"a": i64(0).reshape(()), "b": i64(2**40).reshape(()), "d": i64(1).reshape(())}, r"input values 'a' = 0, 'b'"),
    ("unsqueeze", {"x": X, "axes": i64(1, 1)}, r"input values 'axes' = \[1, 1\] decide shapes"),
    ("slice", {"x": X, "b": i64(0, 0), "e": i64(1, 1), "a": i64(0, 1), "s": i64(1, 0)}, r"input values 'b' = \[0, 0\]"),
    ("pad", {"x": X, "p": i64(0, -4, 0, 0, 0, 0), "v": np.array(0, np.float32)}, r"input values 'p' = \[0, -4,"),
    ("pad_reflect_axes", {"x": X, "p": i64(1, 1), "a": i64(3)}, r"input values 'p' = \[1, 1\], 'a' = \[3\]"),
    ("split", {"x": X, "s": i64(1, 2)}, r"input values 's' = \[1, 2\] decide shapes"),
    ("cumsum", {"x": X, "a": i64(-4).reshape(())}, r"input values 'a' = -4 decide shapes"),
    ("tile", {"x": X, "r": i64(1, -1, 1)}, r"input values 'r' = \[1, -1, 1\] decide shapes"),
])
def test_bad_values_are_a_clear_error(tmp_path: Path, name: str, feeds: dict, says: str) -> None:
    out = _bundle(tmp_path, name)
    b = load_bundle(out, "simd")
    with pytest.raises(InputError, match=says):
        b.run(feeds)
    if name == "reshape" and _node_major() >= 20:   # the JS runtime: a refusal naming the values, then a good run
        runs = _node_runs(tmp_path / "node", out, [feeds, CASES[name][1][0]])["runs"]
        assert "values of 's' [5,5]" in runs[0]["error"] and "error" not in runs[1], runs
    good = CASES[name][1][0]   # the session stays usable
    np.testing.assert_allclose(b.run(good)[next(iter(_reference(CASES[name][0](), good)))],
                               next(iter(_reference(CASES[name][0](), good).values())), rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(shutil.which("qemu-aarch64") is None or shutil.which("aarch64-linux-gnu-gcc") is None,
                    reason="qemu-user or gcc-aarch64-linux-gnu missing")
@pytest.mark.parametrize("name, bad, input_name", [("reduce_sum", {"x": X, "axes": i64(7)}, "axes"),   # axis 7 of rank 3
                                                   ("slice", {"x": X, "b": i64(0, 0), "e": i64(1, 1), "a": i64(0, 0),
                                                              "s": i64(1, 1)}, "b")])   # axis 0 twice
def test_edgepack_run_under_qemu(tmp_path: Path, name: str, bad: dict, input_name: str) -> None:
    m, out = CASES[name][0](), _bundle(tmp_path, name, "pi5")
    for k, feeds in enumerate([*CASES[name][1][:2], bad]):
        d = tmp_path / f"r{k}"
        d.mkdir()
        args = []
        for n, v in feeds.items():
            np.save(d / f"{n}.npy", v)
            args += ["--input", f"{n}={d / f'{n}.npy'}"]
        r = subprocess.run([*E.qemu_cmd("pi5"), str(out / "edgepack-run"), str(out), *args, "--output", f"y={d / 'y.npy'}"],
                           capture_output=True, text=True, timeout=600)
        if k == 2:   # values that give no valid shape
            assert r.returncode == 2 and f"the values of input '{input_name}'" in r.stderr, r.stderr
            continue
        assert r.returncode == 0, r.stderr
        np.testing.assert_allclose(np.load(d / "y.npy"), _reference(m, feeds)["y"], rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None, reason="gcc-aarch64-linux-gnu missing")
def test_edge_python_module(tmp_path: Path) -> None:
    """The pi5 bundle's own Python module (on the host build of the core, as tests/test_edge_dynamic.py runs it)."""
    out = _bundle(tmp_path, "reduce_sum", "pi5")
    r = subprocess.run(["make", "-s", "-C", str(E.EDGE), "build/host/libedgepack.so"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    spec = importlib.util.spec_from_file_location("edgepack_runtime", out / "edgepack_runtime.py")
    rt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rt)
    s = rt.Session(out, lib=E.EDGE / "build/host/libedgepack.so")
    m = CASES["reduce_sum"][0]()
    for feeds in CASES["reduce_sum"][1]:
        np.testing.assert_allclose(s.run(feeds)["y"], _reference(m, feeds)["y"], rtol=1e-5, atol=1e-6)
    with pytest.raises(rt.EdgepackError, match=r"input values 'axes' = \[-4\] decide shapes"):
        s.run({"x": X, "axes": i64(-4)})


def test_java_session_writes_value_inputs(tmp_path: Path) -> None:
    """The Android Java Session (edge/android, on the host build of the core and the host JVM, as
    tests/test_edge_dynamic.py runs it) writes the value inputs' values before resolving: Slice with different
    values per run, through run(Tensor...) and setInputShapes + run(ByteBuffer...), and a refusal naming them."""
    if shutil.which("javac") is None or shutil.which("aarch64-linux-gnu-gcc") is None:
        pytest.skip("no JDK or gcc-aarch64-linux-gnu")
    r = subprocess.run(["make", "-s", "-C", str(E.EDGE), "build/host/libedgepack.so"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    make, runs = CASES["slice"]
    m, out = make(), _bundle(tmp_path, "slice", "android")
    names = [i.name for i in m.graph.input]
    bad = {"x": X, "b": i64(0, 0), "e": i64(1, 1), "a": i64(2, -1), "s": i64(1, 1)}   # axis 2 twice
    cases = [java_case(tmp_path / f"case{k}", [feeds[n] for n in names],
                       [] if feeds is bad else [_reference(m, feeds)["y"]])
             for k, feeds in enumerate([*runs, bad])]
    r = run_dynamic_session_test(tmp_path, E.EDGE / "build/host", out, *cases[:-1], "--bad-values",
                                 f"{cases[-1]},input values 'b' = [0, 0], 'e' = [1, 1], 'a' = [2, -1]")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout and "refused: input values 'b'" in r.stdout, r.stdout
