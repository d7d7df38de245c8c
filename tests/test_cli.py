"""The `package` command end to end: package, run, inspect, bench, and its error messages."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from .conftest import f32, make_model


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "packager.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_package_run_inspect_bench(tmp_path: Path, reshape_model: onnx.ModelProto) -> None:
    onnx.save(reshape_model, tmp_path / "m.onnx")
    r = cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b"))
    assert r.returncode == 0, r.stderr
    names = {p.name for p in (tmp_path / "b").iterdir()}
    assert {"manifest.json", "model.onnx", "model.plan", "edgepack.wasm", "edgepack-scalar.wasm"} <= names
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["verification"]["max_abs_diff"] == 0.0

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", x)
    r = cli("run", str(tmp_path / "b"), "--input", f"x={tmp_path / 'x.npy'}", "--output", f"y={tmp_path / 'y.npy'}")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), x.reshape(3, 2))

    r = cli("inspect", str(tmp_path / "b"))
    assert r.returncode == 0 and "arena" in r.stdout and "weights" in r.stdout

    r = cli("bench", str(tmp_path / "b"), "--warmup", "0.2", "--seconds", "0.3")
    assert r.returncode == 0 and "p50" in r.stdout and "p99" in r.stdout


def test_bench_profile_lists_kernels(tmp_path: Path) -> None:
    from .conftest import model_path
    r = cli(str(model_path("cifar10net")), "-o", str(tmp_path / "b"), "--no-verify")
    assert r.returncode == 0, r.stderr
    r = cli("bench", str(tmp_path / "b"), "--warmup", "0.2", "--seconds", "0.3", "--profile")
    assert r.returncode == 0, r.stderr
    assert "CONV" in r.stdout and "per kernel:" in r.stdout


def test_bench_rewrites_inputs_every_run(tmp_path: Path) -> None:
    """minilm's token ids are consumed early and their bytes reused: re-running without rewriting them
    would gather with garbage indices (the runtime refuses with 'index out of range')."""
    from .conftest import model_path
    r = cli(str(model_path("minilm_like")), "-o", str(tmp_path / "b"), "--no-verify")
    assert r.returncode == 0, r.stderr
    r = cli("bench", str(tmp_path / "b"), "--warmup", "0", "--seconds", "0.2", "--profile")
    assert r.returncode == 0, r.stderr
    assert "MATMUL" in r.stdout


def test_run_rejects_wrong_input(tmp_path: Path, reshape_model: onnx.ModelProto) -> None:
    onnx.save(reshape_model, tmp_path / "m.onnx")
    assert cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b")).returncode == 0
    np.save(tmp_path / "bad.npy", np.zeros((3, 3), np.float32))
    r = cli("run", str(tmp_path / "b"), "--input", f"x={tmp_path / 'bad.npy'}")
    assert r.returncode == 1 and "shape [3, 3], expected [2, 3]" in r.stderr
    np.save(tmp_path / "bad.npy", np.zeros((2, 3), np.float64))
    r = cli("run", str(tmp_path / "b"), "--input", f"x={tmp_path / 'bad.npy'}")
    assert r.returncode == 1 and "dtype float64, expected float32" in r.stderr
    r = cli("run", str(tmp_path / "b"), "--input", f"z={tmp_path / 'bad.npy'}")
    assert r.returncode == 1 and "unknown input(s) 'z'" in r.stderr


def test_malformed_model_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "bad.onnx").write_bytes(b"\x08\x07garbage" * 10)
    r = cli(str(tmp_path / "bad.onnx"), "-o", str(tmp_path / "b"))
    assert r.returncode == 1 and "error:" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "b").exists()


def test_unsupported_op_names_op_node_opset(tmp_path: Path) -> None:
    m = make_model([helper.make_node("Unique", ["x"], ["y"], name="uniq7", sorted=1)],
                   [f32("x", [4])], [f32("y", [None])], opset=17)
    onnx.save(m, tmp_path / "m.onnx")
    r = cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b"))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "Unique" in r.stderr and "uniq7" in r.stderr and "opset 17" in r.stderr


def test_custom_domain_refused(tmp_path: Path) -> None:
    node = helper.make_node("Evil", ["x"], ["y"], name="n0", domain="com.attacker")
    g = helper.make_graph([node], "g", [f32("x", [2])], [f32("y", [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.attacker", 1)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    r = cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b"))
    assert r.returncode == 1 and "com.attacker" in r.stderr and "Traceback" not in r.stderr


def test_failed_packaging_keeps_previous_bundle(tmp_path: Path, reshape_model: onnx.ModelProto) -> None:
    onnx.save(reshape_model, tmp_path / "m.onnx")
    assert cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b")).returncode == 0
    before = (tmp_path / "b" / "model.plan").read_bytes()
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    assert cli(str(tmp_path / "bad.onnx"), "-o", str(tmp_path / "b")).returncode == 1
    assert (tmp_path / "b" / "model.plan").read_bytes() == before


def test_symbolic_dims_default_to_one_with_notice(tmp_path: Path) -> None:
    import numpy as np
    from onnx import numpy_helper
    shape = numpy_helper.from_array(np.array([-1, 2], dtype=np.int64), "s")
    m = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], [f32("x", ["batch", 4])], [f32("y", ["b", 2])], [shape])
    onnx.save(m, tmp_path / "m.onnx")
    r = cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b"))
    assert r.returncode == 0, r.stderr
    assert "symbolic dimension 'batch' set to 1" in r.stderr
    r = cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b3"), "--input-shape", "x=3x4")
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp_path / "b3" / "manifest.json").read_text())
    assert manifest["inputs"][0]["shape"] == [3, 4] and manifest["outputs"][0]["shape"] == [6, 2]
