"""Weights shipped once (issue 20): a bundle carries them in model.plan only; the optimized graph (model.onnx, as large
again, loaded by no runtime) is written when asked for (emit_onnx=True, `package --emit-onnx`), on every target."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.reference import reference_run

WEIGHTS = 1024 * 2048 * 4   # bytes of float32 weights: large next to the runtime files (~1 MB)


def _matmul_model() -> onnx.ModelProto:
    w = np.random.default_rng(0).standard_normal((1024, 2048)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "ship_once",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2048])],
                          [numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def test_web_folder_holds_the_weights_once(tmp_path: Path) -> None:
    m = _matmul_model()
    lean = package(m, out=tmp_path / "lean")   # verified against onnxruntime without writing model.onnx
    full = package(m, out=tmp_path / "full", verify=False, emit_onnx=True)
    manifest = json.loads((lean / "manifest.json").read_text())
    assert "model.onnx" not in manifest["files"] and not (lean / "model.onnx").exists()
    assert manifest["verification"]["max_abs_diff"] < 1e-3
    assert manifest["plan"]["weights_bytes"] == WEIGHTS
    assert _folder_bytes(lean) < 1.25 * WEIGHTS, _folder_bytes(lean)        # ~1x the weights (+ runtime files)
    assert _folder_bytes(full) > 1.9 * WEIGHTS, _folder_bytes(full)         # asked for: the graph, the weights again
    assert "model.onnx" in json.loads((full / "manifest.json").read_text())["files"]
    x = {"x": np.random.default_rng(1).standard_normal((1, 1024)).astype(np.float32)}
    np.testing.assert_allclose(load_bundle(lean).run(x)["y"], reference_run(onnx.load(str(full / "model.onnx")), x)["y"],
                               rtol=1e-4, atol=1e-3)


def test_cli_emit_onnx(tmp_path: Path) -> None:
    onnx.save(_matmul_model(), tmp_path / "m.onnx")
    cli = [sys.executable, "-m", "packager.cli", str(tmp_path / "m.onnx"), "--no-verify", "-o"]
    r = subprocess.run([*cli, str(tmp_path / "b"), "--emit-onnx"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    shipped = onnx.load(str(tmp_path / "b" / "model.onnx"))
    assert [n.op_type for n in shipped.graph.node] == ["MatMul"]
    load_bundle(tmp_path / "b")   # listed in the manifest with its SHA-256, checked like every file


@pytest.mark.parametrize("target", ["pi5", "android"])
def test_edge_bundles_ship_the_graph_only_when_asked(target: str, tmp_path: Path) -> None:
    """The android bundle's ORT-Mobile files are made from the graph in memory, written or not."""
    small = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]), opset_imports=[helper.make_opsetid("", 17)])
    lean = package(small, target=target, out=tmp_path / "lean", verify=False)
    full = package(small, target=target, out=tmp_path / "full", verify=False, emit_onnx=True)
    files = json.loads((lean / "manifest.json").read_text())["files"]
    assert "model.onnx" not in files and not (lean / "model.onnx").exists()
    assert "model.onnx" in json.loads((full / "manifest.json").read_text())["files"]
    if target == "android":
        assert {"ort/model.ort", "ort/model.required_operators.config"} <= set(files)
