"""Calibration data (packager/quantize/calib_data.py) and the refusals around it: every bad input gets an
error naming what is wrong, never a crash or a guess."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from packager import cli
from packager.analyze import analyze
from packager.errors import PackagerError
from packager.model_load import load_model
from packager.quantize import input_specs, quantize_step, resolve_auto
from packager.quantize.calib_data import ImageOptions, load_calibration

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "demo" / "digits"


@pytest.fixture(scope="module")
def digits():
    return analyze(load_model(DIGITS / "digits_cnn.onnx", frozenset()))


def _two_input_model(path: Path) -> Path:
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "two",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_npz_with_labels_loads_and_splits(digits):
    d = load_calibration(DIGITS / "digits_calibration.npz", input_specs(digits))
    assert d.count == 200 and d.inputs["image"].shape == (200, 1, 1, 8, 8) and d.labels.shape == (200, 1)
    cal, ev, note = d.split(0.8)
    assert (cal.count, ev.count) == (160, 40) and "40 held out" in note
    rows = lambda s: {s.inputs["image"][i].tobytes() for i in range(s.count)}  # noqa: E731
    assert not rows(cal) & rows(ev)                    # disjoint
    again = d.split(0.8)[1]
    assert np.array_equal(again.inputs["image"], ev.inputs["image"])   # seeded: reproducible


def test_npy_and_folder(digits, tmp_path):
    x = np.load(DIGITS / "digits_calibration.npz")["image"]
    np.save(tmp_path / "a.npy", x[:30])
    d = load_calibration(tmp_path / "a.npy", input_specs(digits))
    assert d.count == 30 and d.labels is None
    np.save(tmp_path / "b.npy", x[30:50].astype(np.float64))          # float64 is accepted, stored as float32
    d = load_calibration(tmp_path, input_specs(digits))
    assert d.count == 50 and d.inputs["image"].dtype == np.float32
    np.save(tmp_path / "labels.npy", np.arange(50) % 10)   # --labels FILE.npy
    (tmp_path / "labels.npy").rename(tmp_path.parent / "labels.npy")   # out of the data folder
    d = load_calibration(tmp_path, input_specs(digits), labels=tmp_path.parent / "labels.npy")
    assert d.labels[:, 0].tolist() == (np.arange(50) % 10).tolist()


@pytest.mark.parametrize("data, message", [
    ({"img": np.zeros((4, 1, 8, 8), np.float32)}, "'img', which are not inputs of the model"),
    ({"image": np.zeros((4, 1, 9, 8), np.float32)}, "has shape [4, 1, 9, 8]; expected [N, 1, 8, 8]"),
    ({"image": np.zeros((4, 8, 8), np.float32)}, "expected [N, 1, 8, 8]"),
    ({"image": np.zeros((4, 1, 8, 8), np.int32)}, "has dtype int32; the model input is float32"),
    ({"image": np.zeros((4, 1, 8, 8), np.complex64)}, "has dtype complex64"),
    ({"image": np.full((4, 1, 8, 8), np.nan, np.float32)}, "NaN"),
    ({"image": np.zeros((0, 1, 8, 8), np.float32)}, "no samples"),
    ({"image": np.zeros((4, 1, 8, 8), np.float32), "labels": np.arange(3)}, "hold 3 values"),
    ({"image": np.zeros((4, 1, 8, 8), np.float32), "labels": np.zeros(4, np.float32)}, "integer class ids"),
])
def test_bad_data_is_named(digits, data, message):
    with pytest.raises(PackagerError) as e:
        load_calibration(data, input_specs(digits))
    assert message in str(e.value)


def test_bad_files(digits, tmp_path):
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(PackagerError, match="not a readable .npz/.npy"):
        load_calibration(tmp_path / "junk.npz", input_specs(digits))
    with pytest.raises(PackagerError, match="no such file"):
        load_calibration(tmp_path / "missing.npz", input_specs(digits))
    two = analyze(load_model(_two_input_model(tmp_path / "two.onnx"), frozenset()))
    np.save(tmp_path / "x.npy", np.zeros((3, 4), np.float32))
    with pytest.raises(PackagerError, match="model has 2 inputs"):
        load_calibration(tmp_path / "x.npy", input_specs(two))
    np.savez(tmp_path / "ab.npz", a=np.zeros((3, 4), np.float32), b=np.zeros((2, 4), np.float32))
    with pytest.raises(PackagerError, match="different sample counts"):
        load_calibration(tmp_path / "ab.npz", input_specs(two))
    np.savez(tmp_path / "a_only.npz", a=np.zeros((3, 4), np.float32))
    with pytest.raises(PackagerError, match="no array for input\\(s\\) 'b'"):
        load_calibration(tmp_path / "a_only.npz", input_specs(two))


def test_image_folder_with_class_subfolders(digits, tmp_path):
    from PIL import Image
    rng = np.random.default_rng(0)
    pixels = {}
    for k in ("cat", "dog"):
        (tmp_path / k).mkdir()
        for i in range(3):
            a = rng.integers(0, 256, (8, 8), dtype=np.uint8)
            Image.fromarray(a, "L").save(tmp_path / k / f"{i}.png")
            pixels[(k, i)] = a
    d = load_calibration(tmp_path, input_specs(digits), images=ImageOptions(mean=(0.5,), std=(0.25,)))
    assert d.count == 6 and d.labels[:, 0].tolist() == [0, 0, 0, 1, 1, 1]
    want = (pixels[("dog", 2)].astype(np.float32) / 255 - 0.5) / 0.25
    np.testing.assert_allclose(d.inputs["image"][5, 0, 0], want, rtol=1e-6)
    with pytest.raises(PackagerError, match="1 or 1 values"):
        load_calibration(tmp_path, input_specs(digits), images=ImageOptions(mean=(0.5, 0.5, 0.5)))


def test_int8_without_data_is_refused(digits, capsys, tmp_path):
    with pytest.raises(PackagerError, match="needs calibration data .* does not guess"):
        quantize_step(digits, "web", "int8")
    rc = cli.main([str(DIGITS / "digits_cnn.onnx"), "-o", str(tmp_path / "b"), "--quantize", "int8"])
    assert rc == 1 and "--quantize int8 needs calibration data" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
    rc = cli.main([str(DIGITS / "digits_cnn.onnx"), "-o", str(tmp_path / "b"), "--calibration",
                   str(tmp_path / "nope.npz")])
    assert rc == 1 and "no such file" in capsys.readouterr().err


def test_auto_resolves_per_documented_default(digits):
    r = quantize_step(digits, "pi5", "auto")
    assert r.mode == "none" and r.evaluate is None and not r.weights_fp16
    r = quantize_step(digits, "web", "auto", DIGITS / "digits_calibration.npz")
    assert r.mode == "int8" and r.info["calibration"]["samples"] == 200 and r.evaluate.count == 40
    minilm = load_model(ROOT / ".cache" / "models" / "minilm_like.onnx", frozenset())
    assert resolve_auto("android", True, minilm)[0] == "int8-dynamic"      # MatMul-heavy, no Conv
    assert resolve_auto("android", False, minilm)[0] == "none"


def test_cli_image_folder_end_to_end(tmp_path, capsys):
    """Real labelled digits written as PNGs in class folders -> package --calibration FOLDER (fp16): the
    accuracy report, run through the bundle's wasm, carries both models' accuracy on the held-out part."""
    import json
    from PIL import Image
    z = np.load(DIGITS / "digits_test.npz")
    for i, (img, lab) in enumerate(zip(z["image"][:150], z["labels"][:150])):
        d = tmp_path / "imgs" / f"class{lab}"
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.round(img[0] * 255).astype(np.uint8), "L").save(d / f"{i}.png")
    out = tmp_path / "bundle"
    rc = cli.main([str(DIGITS / "digits_cnn.onnx"), "-o", str(out), "--quantize", "fp16", "--calibration",
                   str(tmp_path / "imgs"), "--image-size", "8x8", "--image-mean", "0", "--image-std", "1"])
    assert rc == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "accuracy (fp16 vs float32, 150 samples)" in err     # fp16 calibrates nothing: all evaluate
    rep = json.loads((out / "manifest.json").read_text())["accuracy"]["outputs"]["logits"]
    assert rep["accuracy_float32"] >= 0.9 and abs(rep["accuracy_bundle"] - rep["accuracy_float32"]) <= 1 / 150
    assert "| logits |" in (out / "accuracy.md").read_text()
