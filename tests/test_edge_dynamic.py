"""Run-time input shapes (plan version 2) on the edge targets: `package --target pi5|android` with symbolic dims,
then the bundle's own runtimes at several shapes against onnxruntime: edgepack-run under qemu-aarch64, the
Android library through the dlopen harness under qemu, the Python module and the Java wrapper (host builds of the
same core, as tests/test_edge.py does). Inputs above a bound are refused with the input, dimension and bound named.

Small shapes only: qemu is slow.
"""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import package
from packager.reference import random_inputs, reference_run
from packager.errors import PackagerError
from packager.targets import edge as E

from .conftest import model_path

pytestmark = pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None, reason="gcc-aarch64-linux-gnu missing")
needs_qemu = pytest.mark.skipif(shutil.which("qemu-aarch64") is None, reason="qemu-user missing")
TOL = 1e-4
BATCH_MAX, SEQ_MAX = 4, 160
SHAPES = [(1, 7, 8), (3, 33, 8), (2, 128, 8)]


def _model() -> onnx.ModelProto:
    """x[batch, seq, 8] -> Relu(x + b) * c and Sigmoid(x): elementwise with two symbols and a fixed dim."""
    rng = np.random.default_rng(7)
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    c = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "c")
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
         helper.make_node("Mul", ["r", "c"], ["y"]), helper.make_node("Sigmoid", ["x"], ["z"])],
        "ew_dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 8]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", "seq", 8])], [b, c])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _package(model, target: str, out: Path, **kw) -> Path:
    return package(model, target=target, out=out, **kw)


@pytest.fixture(scope="module")
def pi5_dyn(tmp_path_factory) -> Path:
    return _package(_model(), "pi5", tmp_path_factory.mktemp("pi5dyn") / "ew",
                    input_shapes={"x": ((1, BATCH_MAX), (1, SEQ_MAX), 8)})


@pytest.fixture(scope="module")
def android_dyn(tmp_path_factory) -> Path:
    return _package(_model(), "android", tmp_path_factory.mktemp("anddyn") / "ew",
                    input_shapes={"x": ((1, BATCH_MAX), (1, SEQ_MAX), 8)})


def _feeds(shape, seed: int) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}


def _make(goal: str) -> Path:
    r = subprocess.run(["make", "-s", "-C", str(E.EDGE), "-j2", goal], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return E.EDGE / goal


def _run_cli(cli: Path, bundle: Path, tmp: Path, feeds: dict[str, np.ndarray], qemu: bool, *extra: str):
    args = []
    for i, (n, v) in enumerate(feeds.items()):
        np.save(tmp / f"in{i}.npy", v)
        args += ["--input", f"{n}={tmp / f'in{i}.npy'}"]
    pre = E.qemu_cmd("pi5") if qemu else []
    return subprocess.run([*pre, str(cli), str(bundle), *args, *extra], capture_output=True, text=True, timeout=600)


# ------------------------------------------------------------------ packaging

def test_pi5_manifest_and_consistency_at_example_shape(pi5_dyn: Path) -> None:
    m = json.loads((pi5_dyn / "manifest.json").read_text())
    assert m["plan"]["version"] == 2
    assert m["inputs"][0]["shape"] == ["batch", "seq", 8]
    assert m["dims"]["batch"]["max"] == BATCH_MAX and m["dims"]["seq"]["max"] == SEQ_MAX
    c = m["consistency"]
    ex = [m["dims"]["batch"]["example"], m["dims"]["seq"]["example"], 8]
    assert c["input_shapes"] == {"x": ex}
    if shutil.which("qemu-aarch64"):
        assert c["onnxruntime_vs_neon"]["max_abs_diff"] < TOL and c["wasm_vs_neon"]["max_abs_diff"] < TOL
        assert m["verification"]["build"] == "neon"
    readme = (pi5_dyn / "README.md").read_text()
    assert "resolved at run time" in readme and "`batch`: 1..4" in readme


def test_static_targets_refuse_strict_dynamic(tmp_path: Path) -> None:
    with pytest.raises(PackagerError, match="strict needs fixed shapes"):
        package(_model(), target="pi5", out=tmp_path / "s", dynamic=True, profile="strict")


# ------------------------------------------------------------------ edgepack-run

@needs_qemu
def test_cli_under_qemu_at_three_shapes(pi5_dyn: Path, tmp_path: Path) -> None:
    ref = _model()
    for k, shape in enumerate(SHAPES):
        feeds = _feeds(shape, k)
        d = tmp_path / f"s{k}"
        d.mkdir()
        r = _run_cli(pi5_dyn / "edgepack-run", pi5_dyn, d, feeds, True,
                     "--output", f"y={d / 'y.npy'}", "--output", f"z={d / 'z.npy'}")
        assert r.returncode == 0, r.stderr
        want = reference_run(ref, feeds)
        for name in ("y", "z"):
            got = np.load(d / f"{name}.npy")
            assert got.shape == shape
            np.testing.assert_allclose(got, want[name], rtol=TOL, atol=TOL)


@needs_qemu
def test_cli_refuses_dim_above_bound_under_qemu(pi5_dyn: Path, tmp_path: Path) -> None:
    r = _run_cli(pi5_dyn / "edgepack-run", pi5_dyn, tmp_path, _feeds((BATCH_MAX + 1, 7, 8), 0), True)
    assert r.returncode == 2
    assert "input 'x': dimension 0 ('batch') is 5, above its bound 4" in r.stderr, r.stderr


@pytest.mark.parametrize("shape, msg", [
    ((2, SEQ_MAX + 1, 8), f"input 'x': dimension 1 ('seq') is {SEQ_MAX + 1}, above its bound {SEQ_MAX}"),
    ((0, 7, 8), "input 'x': dimension 0 ('batch') is 0, below its bound 1"),
    ((2, 7, 9), "shape [2, 7, 9], expected [batch, seq, 8] (dimension 2 is fixed to 8)"),
    ((2, 7), "shape [2, 7], expected [batch, seq, 8]"),
])
def test_host_cli_refuses_bad_shapes(pi5_dyn: Path, tmp_path: Path, shape, msg: str) -> None:
    r = _run_cli(_make("build/host/edgepack-run"), pi5_dyn, tmp_path, _feeds(shape, 0), False)
    assert r.returncode == 2 and msg in r.stderr, r.stderr


def test_host_cli_info_and_bench(pi5_dyn: Path, tmp_path: Path) -> None:
    cli = _make("build/host/edgepack-run")
    r = subprocess.run([str(cli), str(pi5_dyn), "--info"], capture_output=True, text=True)
    assert r.returncode == 0 and "plan version 2" in r.stdout and "input  x: float32[batch, seq, 8]" in r.stdout
    assert "dim    seq: 1..160" in r.stdout
    for extra in ([], ["--input", None]):   # random inputs at the example shape; then a given shape
        args = [str(cli), str(pi5_dyn), "--bench", "--warmup", "0.05", "--seconds", "0.1"]
        if extra:
            np.save(tmp_path / "x.npy", _feeds((3, 50, 8), 1)["x"])
            args += ["--input", f"x={tmp_path / 'x.npy'}"]
        r = subprocess.run(args, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "p50" in r.stdout, r.stderr


def test_host_cli_refuses_manifest_disagreeing_with_plan(pi5_dyn: Path, tmp_path: Path) -> None:
    b = tmp_path / "b"
    shutil.copytree(pi5_dyn, b)
    m = json.loads((b / "manifest.json").read_text())
    m["inputs"][0]["shape"] = ["batch", "nosuch", 8]
    (b / "manifest.json").write_text(json.dumps(m))
    r = _run_cli(_make("build/host/edgepack-run"), b, tmp_path, _feeds((1, 7, 8), 0), False)
    assert r.returncode == 3 and "'nosuch', which 'dims' does not list" in r.stderr, r.stderr
    m["inputs"][0]["shape"] = [1, "seq", 8]   # a fixed dim where the plan has a symbol
    (b / "manifest.json").write_text(json.dumps(m))
    r = _run_cli(_make("build/host/edgepack-run"), b, tmp_path, _feeds((1, 7, 8), 0), False)
    assert r.returncode == 3 and "disagrees with the plan" in r.stderr, r.stderr


# ------------------------------------------------------------------ Python module, Android library, Java

def test_python_module_at_two_shapes(pi5_dyn: Path) -> None:
    lib = _make("build/host/libedgepack.so")
    spec = importlib.util.spec_from_file_location("edgepack_runtime", pi5_dyn / "edgepack_runtime.py")
    rt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rt)
    s = rt.Session(pi5_dyn, lib=lib)
    assert s.dynamic
    for k, shape in enumerate([SHAPES[1], SHAPES[0], SHAPES[1]]):   # grow, shrink, same again
        feeds = _feeds(shape, 10 + k)
        got = s.run(feeds)
        want = reference_run(_model(), feeds)
        for name in ("y", "z"):
            assert got[name].shape == shape
            np.testing.assert_allclose(got[name], want[name], rtol=TOL, atol=TOL)
    with pytest.raises(rt.EdgepackError, match=r"dimension 0 \('batch'\) is 5, above its bound 4"):
        s.run(_feeds((5, 7, 8), 0))
    with pytest.raises(rt.EdgepackError, match="shape"):
        s.run(_feeds((2, 7, 9), 0))
    assert s.run(_feeds(SHAPES[0], 10))["y"].shape == SHAPES[0]   # usable after a refusal
    assert s.bench(warmup=0.02, seconds=0.05)["runs"] >= 10


def test_android_io_txt_and_consistency(android_dyn: Path) -> None:
    io = (android_dyn / "assets/edgepack/io.txt").read_text()
    assert "input\tx\tbatch,seq,8" in io and "output\ty\n" in io
    m = json.loads((android_dyn / "manifest.json").read_text())
    assert m["plan"]["version"] == 2 and m["consistency"]["input_shapes"]["x"][2] == 8
    if shutil.which("qemu-aarch64"):   # the Android library through the dlopen harness at the example shape
        assert m["consistency"]["onnxruntime_vs_neon"]["max_abs_diff"] < TOL
        assert "harness" in m["consistency"]["neon_runner"]


@needs_qemu
def test_android_library_under_qemu_at_two_shapes(android_dyn: Path) -> None:
    m = json.loads((android_dyn / "manifest.json").read_text())
    for k, shape in enumerate(SHAPES[:2]):
        feeds = _feeds(shape, 20 + k)
        got = E.run_neon(android_dyn, "android", feeds)
        want = reference_run(_model(), feeds)
        for o in m["outputs"]:
            assert got[o["name"]].shape == shape
            np.testing.assert_allclose(got[o["name"]], want[o["name"]], rtol=TOL, atol=TOL)


def java_case(d: Path, ins: list[np.ndarray], outs: list[np.ndarray]) -> str:
    """A case folder DynamicSessionTest reads: in<i>.bin/.shape per input, out<i>.bin/.shape per expected output."""
    d.mkdir()
    for kind, arrays in (("in", ins), ("out", outs)):
        for i, a in enumerate(arrays):
            (d / f"{kind}{i}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
            (d / f"{kind}{i}.shape").write_text(",".join(map(str, a.shape)))
    return str(d)


def run_dynamic_session_test(tmp_path: Path, lib_dir: Path, bundle: Path, *args: str) -> subprocess.CompletedProcess:
    """edge/android/test/DynamicSessionTest, compiled with the Java wrapper, on the host JVM over an android
    bundle's plan and io.txt; `args`: its case folders and options."""
    classes = tmp_path / "classes"
    srcs = [str(p) for p in (E.EDGE / "android" / "java" / "org" / "edgepack").glob("*.java")]
    subprocess.run(["javac", "--release", "8", "-Xlint:-options", "-d", str(classes), *srcs], check=True)
    subprocess.run(["javac", "-cp", str(classes), "-d", str(classes),
                    str(E.EDGE / "android" / "test" / "DynamicSessionTest.java")], check=True)
    return subprocess.run(["java", f"-Djava.library.path={lib_dir}", "-cp", str(classes), "DynamicSessionTest",
                           str(bundle / "assets/edgepack/model.plan"), str(bundle / "assets/edgepack/io.txt"), *args],
                          capture_output=True, text=True, timeout=300)


def test_java_wrapper_at_two_shapes_on_host_jvm(android_dyn: Path, tmp_path: Path) -> None:
    if shutil.which("javac") is None:
        pytest.skip("no JDK")
    lib = _make("build/host/libedgepack.so")
    cases = []
    for k, shape in enumerate([SHAPES[0], SHAPES[1]]):
        feeds = _feeds(shape, 30 + k)
        want = reference_run(_model(), feeds)
        cases.append(java_case(tmp_path / f"case{k}", [feeds["x"]], [want["y"], want["z"]]))
    r = run_dynamic_session_test(tmp_path, lib.parent, android_dyn, *cases,
                                 "--above", "0,0,5,input 'x': dimension 0 ('batch') is 5, above its bound 4")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout


# ------------------------------------------------------------------ a real model, once its kernels resolve

@needs_qemu
def test_minilm_like_dyn_pi5_at_two_shapes(tmp_path: Path) -> None:
    src = model_path("minilm_like_dyn")
    b = _package(src, "pi5", tmp_path / "minilm", dynamic=True)
    m = json.loads((b / "manifest.json").read_text())
    ref = onnx.load(str(src))
    for k, (batch, seq) in enumerate([(1, 7), (2, 128)]):
        specs = [dict(s, shape=[{"batch": batch}.get(d, seq) if isinstance(d, str) else d for d in s["shape"]])
                 for s in m["inputs"]]
        feeds = random_inputs(specs, seed=k)
        got = E.run_cli(b, feeds, m["outputs"], qemu=E.qemu_cmd("pi5"))
        want = reference_run(ref, feeds)
        for name, w in want.items():
            np.testing.assert_allclose(got[name], w, rtol=1e-3, atol=1e-3)


# ------------------------------------------------------------------ hostile manifests (ASan + UBSan build)

@pytest.mark.parametrize("edit, msg", [
    (lambda m: m["dims"]["batch"].update(max=0), "dims['batch'].max invalid"),
    (lambda m: m["dims"]["batch"].update(min=-1), "dims['batch'].min missing"),
    (lambda m: m["dims"]["batch"].update(max="4"), "dims['batch'].max invalid"),
    (lambda m: m["dims"]["batch"].update(max=True), "dims['batch'].max must be an integer or null"),
    (lambda m: m["dims"]["batch"].update(example=99), "dims['batch'].example invalid"),
    (lambda m: m["dims"].update(batch=[1, 4]), "dims['batch'] is not an object"),
    (lambda m: m.update(dims=[]), "'dims' is not an object"),
    (lambda m: m["dims"].update({f"s{i}": {"min": 1, "max": None} for i in range(70)}), "more than 64 symbolic dims"),
    (lambda m: m["dims"].update({"x" * 300: {"min": 1, "max": None}}), "empty or too long"),
    (lambda m: m["inputs"][0].update(shape=["batch", None, 8]), "shape invalid"),
    (lambda m: m["inputs"][0].update(shape=["batch", "seq"]), "disagrees with the plan"),
    (lambda m: m["outputs"][0].update(shape=["batch", "seq", "seq"]), "disagrees with the plan"),
])
def test_cli_refuses_bad_dims_sections_under_asan(pi5_dyn: Path, tmp_path: Path, edit, msg: str) -> None:
    cli = _make("build/asan/edgepack-run")
    b = tmp_path / "b"
    shutil.copytree(pi5_dyn, b)
    m = json.loads((b / "manifest.json").read_text())
    edit(m)
    (b / "manifest.json").write_text(json.dumps(m))
    r = _run_cli(cli, b, tmp_path, _feeds((2, 7, 8), 0), False)
    assert "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 3 and msg in r.stderr, r.stderr


def test_cli_survives_mutated_v2_manifests_under_asan(pi5_dyn: Path, tmp_path: Path) -> None:
    cli = _make("build/asan/edgepack-run")
    rng = np.random.default_rng(1)
    b = tmp_path / "b"
    shutil.copytree(pi5_dyn, b)
    manifest = (pi5_dyn / "manifest.json").read_bytes()
    np.save(tmp_path / "x.npy", _feeds((2, 7, 8), 0)["x"])
    codes = set()
    for _ in range(80):
        d = bytearray(manifest)
        for _ in range(int(rng.integers(1, 4))):
            pos = int(rng.integers(0, len(d)))
            if rng.integers(0, 2):
                d[pos] = int(rng.choice(list(b'{}[]",:0123456789 -nul')))
            else:
                del d[pos:pos + int(rng.integers(1, 8))]
        (b / "manifest.json").write_bytes(bytes(d))
        r = subprocess.run([str(cli), str(b), "--input", f"x={tmp_path / 'x.npy'}", "--output", f"y={tmp_path / 'y.npy'}"],
                           capture_output=True, text=True, errors="replace", timeout=60)
        assert "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr[-2000:]
        assert r.returncode in (0, 2, 3), (r.returncode, r.stderr[-500:])
        codes.add(r.returncode)
    assert 3 in codes
