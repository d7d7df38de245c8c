"""Packaging a model of large weights holds them about once (issue 21): peak RSS of a real `package` run, the
weights store's references never leaving the packager, and the streamed writers producing what onnx and the
runtime read. scripts/bigmodel_rss.py measures 0.4-1.9 GB models; this one (64 MB) keeps regressions out."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from packager import weights
from packager.bundle import load_bundle
from packager.model_load import load_model

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import bigmodel_rss  # noqa: E402

SIZE = 64 * 1000 * 1000
MAX_RATIO = 2.5   # peak RSS above the packager's own (the same run on a 1 MB model), per byte of model


def _peak_rss(model: Path, out: Path) -> int:
    """Peak RSS of `package model -o out --emit-onnx` in a fresh interpreter: RUSAGE_CHILDREN's maximum is then this run's
    largest process (the packager, or its onnxruntime child), not one of pytest's other children."""
    code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    r = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "packager.cli", str(model), "-o", str(out),
                        "--emit-onnx"],   # model.onnx too: its streamed writer is part of what is measured
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return int(r.stdout.split()[-1]) * 1024


def test_big_weight_packages_holding_it_about_twice(tmp_path: Path) -> None:
    (tmp_path / "small").mkdir()
    (tmp_path / "big").mkdir()
    base = _peak_rss(bigmodel_rss.matmul_model(tmp_path / "small", 1 << 20), tmp_path / "small" / "out")
    model = bigmodel_rss.matmul_model(tmp_path / "big", SIZE)
    size = model.stat().st_size + (tmp_path / "big" / "w.bin").stat().st_size
    out = tmp_path / "big" / "out"
    peak = _peak_rss(model, out)
    assert peak - base <= MAX_RATIO * size, \
        f"peak RSS {peak / 1e6:.0f} MB, {base / 1e6:.0f} MB for a 1 MB model: {(peak - base) / size:.2f}x the " \
        f"{size / 1e6:.0f} MB model"
    m = json.loads((out / "manifest.json").read_text())
    assert m["verification"]["max_abs_diff"] < 1e-2   # the bundle ran, and agreed with onnxruntime
    shipped = onnx.load(str(out / "model.onnx"))      # an ordinary model: weights inline, no store reference
    w = shipped.graph.initializer[0]
    data = np.fromfile(tmp_path / "big" / "w.bin", np.float32)
    assert w.data_location == TensorProto.DEFAULT and np.array_equal(np.frombuffer(w.raw_data, np.float32), data)


def _model_with(w: np.ndarray) -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, w.shape[0]])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, w.shape[1]])],
                          [onnx.numpy_helper.from_array(w, "W")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_store_references_written_back_as_bytes(tmp_path: Path) -> None:
    """write_model and save_external give onnx's own loader the same model the store stands for."""
    w = np.random.default_rng(1).standard_normal((512, 1024), dtype=np.float32)   # 2 MiB: stored
    onnx.save(_model_with(w), tmp_path / "m.onnx")
    with weights.scope():
        m = load_model(tmp_path / "m.onnx")
        assert weights.is_ref(m.graph.initializer[0])
        assert np.array_equal(weights.to_array(m.graph.initializer[0]), w)
        weights.write_model(m, tmp_path / "inline.onnx")
        (tmp_path / "ext").mkdir()
        weights.save_external(m, tmp_path / "ext")
    for p in (tmp_path / "inline.onnx", tmp_path / "ext" / "model.onnx"):
        back = onnx.load(str(p))
        onnx.checker.check_model(back)
        assert np.array_equal(onnx.numpy_helper.to_array(back.graph.initializer[0]), w)
    with pytest.raises(RuntimeError, match="released"):   # the scope ended: no stale reference reads other bytes
        weights.to_array(m.graph.initializer[0])


def test_tampered_large_plan_refused_as_it_loads(tmp_path: Path) -> None:
    """A plan above VERIFIED_MAX is hashed again while it is copied into the runtime: a change between the
    bundle's check and its run is refused, not run."""
    from packager.api import package
    from packager.bundle import VERIFIED_MAX
    w = np.random.default_rng(2).standard_normal((VERIFIED_MAX // 4096 + 16, 1024), dtype=np.float32)
    onnx.save(_model_with(w), tmp_path / "m.onnx")
    out = package(tmp_path / "m.onnx", out=tmp_path / "b", verify=False, optimize=False)
    b = load_bundle(out)
    x = np.ones((1, w.shape[0]), np.float32)
    assert np.allclose(b.run({"x": x})["y"], x @ w, rtol=1e-3, atol=1e-2)
    b = load_bundle(out)   # checked now; the file changes before its session loads it
    with open(out / "model.plan", "r+b") as f:
        f.seek(-4, 2)
        f.write(b"\x01\x02\x03\x04")
    with pytest.raises(Exception, match="changed after its SHA-256 was checked"):
        b.run({"x": x})


def test_model_cannot_name_a_store_reference(tmp_path: Path) -> None:
    """A model's own external data at 'edgepack-store:<key>' is a file name like any other (never a stored array
    of this process): not found, refused."""
    from packager.errors import ModelLoadError
    m = _model_with(np.ones((4, 4), np.float32))
    w = m.graph.initializer[0]
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", weights.PREFIX + "0"), ("length", "64")):
        e = w.external_data.add()
        e.key, e.value = k, v
    onnx.save(m, tmp_path / "m.onnx")
    with weights.scope():
        weights.put(np.zeros((4, 4), np.float32))
        with pytest.raises(ModelLoadError, match="not found"):
            load_model(tmp_path / "m.onnx")
