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
    assert {"manifest.json", "model.plan", "edgepack.wasm", "edgepack-scalar.wasm"} <= names
    assert "model.onnx" not in names   # the optimized graph ships only with --emit-onnx (tests/test_ship_once.py)
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
    r = cli(str(model_path("minilm_like")), "-o", str(tmp_path / "b"), "--no-verify", "--static")
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
    m = make_model([helper.make_node("Det", ["x"], ["y"], name="det7")],
                   [f32("x", [4, 4])], [f32("y", [None])], opset=17)
    onnx.save(m, tmp_path / "m.onnx")
    r = cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b"))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "Det" in r.stderr and "det7" in r.stderr and "opset 17" in r.stderr


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


def test_symbolic_dims_resolve_at_run_time_by_default(tmp_path: Path) -> None:
    """No --input-shape: a version-2 bundle running any batch; --static: today's static plan (batch 1, its notice);
    a fixed --input-shape: static at that shape; --static with --dynamic or with bounds: a clear error."""
    from onnx import numpy_helper
    shape = numpy_helper.from_array(np.array([-1, 2], dtype=np.int64), "s")
    m = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], [f32("x", ["batch", 4])], [f32("y", ["b", 2])], [shape])
    onnx.save(m, tmp_path / "m.onnx")
    r = cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b"))
    assert r.returncode == 0, r.stderr
    assert "arena per input shape" in r.stdout and "notice" not in r.stderr, (r.stdout, r.stderr)
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["plan"]["version"] == 2 and manifest["inputs"][0]["shape"] == ["batch", 4]
    for batch in (1, 5):
        x = np.arange(batch * 4, dtype=np.float32).reshape(batch, 4)
        np.save(tmp_path / "x.npy", x)
        r = cli("run", str(tmp_path / "b"), "--input", f"x={tmp_path / 'x.npy'}", "--output", f"y={tmp_path / 'y.npy'}")
        assert r.returncode == 0, r.stderr
        np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), x.reshape(-1, 2))
    r = cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b1"), "--static")
    assert r.returncode == 0, r.stderr
    assert "symbolic dimension 'batch' set to 1" in r.stderr
    manifest = json.loads((tmp_path / "b1" / "manifest.json").read_text())
    assert manifest["plan"]["version"] == 1 and manifest["inputs"][0]["shape"] == [1, 4]
    r = cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b3"), "--input-shape", "x=3x4")
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp_path / "b3" / "manifest.json").read_text())
    assert manifest["plan"]["version"] == 1
    assert manifest["inputs"][0]["shape"] == [3, 4] and manifest["outputs"][0]["shape"] == [6, 2]
    r = cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "e"), "--static", "--dynamic")
    assert r.returncode == 2 and "not allowed with argument" in r.stderr
    r = cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "e"), "--static", "--input-shape", "x=[1..8]x4")
    assert r.returncode == 1 and "error: --input-shape bounds" in r.stderr and "--static" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "e").exists()


def test_fallback_to_fixed_shapes_is_one_notice(tmp_path: Path) -> None:
    """Resize with run-time spatial dims has no version-2 lowering: the default packages the static plan and says so
    once, naming the node and telling how to choose; --dynamic refuses instead."""
    from onnx import numpy_helper
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc")
    m = make_model([helper.make_node("Resize", ["x", "", "sc"], ["y"], name="up", mode="nearest")],
                   [f32("x", ["batch", 3, "h", "w"])], [f32("y", ["batch", 3, None, None])], [scales])
    onnx.save(m, tmp_path / "m.onnx")
    r = cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "b"))
    assert r.returncode == 0, r.stderr
    notices = [line for line in r.stderr.splitlines() if line.startswith("notice:")]
    assert len(notices) == 1, r.stderr
    assert "run-time shapes not possible: node 'up' (RESIZE)" in notices[0], notices
    assert "x[batch, 3, h, w]" in notices[0] and "--input-shape x=1x3x1x1" in notices[0] and "--static" in notices[0]
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["plan"]["version"] == 1 and manifest["inputs"][0]["shape"] == [1, 3, 1, 1]
    assert manifest["notices"] == [notices[0][len("notice: "):]]
    assert manifest["verification"]["max_abs_diff"] == 0.0
    r = cli(str(tmp_path / "m.onnx"), "-o", str(tmp_path / "d"), "--dynamic")
    assert r.returncode == 1 and "error:" in r.stderr and "'up' (RESIZE)" in r.stderr and "Traceback" not in r.stderr


def test_help_names_the_shape_choices() -> None:
    r = cli("--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "--static" in text and "--dynamic" in text and "resolved at run time (plan version 2)" in text
