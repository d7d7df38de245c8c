"""Calibration a user can follow and trust (docs/quantization.md): progress lines in logs, warnings when the
samples are too few to calibrate or to evaluate, a separate --evaluation set, and --quantize auto choosing
by measured accuracy against a stated budget (int8, else fp16, else float32, saying why)."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from packager import cli
from packager.analyze import analyze
from packager.errors import PackagerError
from packager.model_load import load_model
from packager.quantize import parse_budget, progress, quantize_step

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "demo" / "digits"


@pytest.fixture(scope="module")
def digits():
    return analyze(load_model(DIGITS / "digits_cnn.onnx", frozenset()))


def test_progress_in_a_log_is_a_line_every_interval_and_a_bar_on_a_terminal():
    log = io.StringIO()
    bar = progress.Progress("calibrating (minmax)", 3, stream=log, interval=0.0)
    for _ in range(3):
        bar.step()
    bar.close()
    assert log.getvalue().splitlines() == [f"calibrating (minmax): {i}/3 (0 s)" for i in (1, 2, 3)]

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True
    tty = Tty()
    bar = progress.Progress("x", 2, stream=tty)
    bar.step()
    bar.close()
    assert tty.getvalue().startswith("\rx [###############...............] 1/2") and tty.getvalue().endswith("\n")
    quiet = io.StringIO()   # a quick step in a log prints nothing: no line per sample
    bar = progress.Progress("x", 100, stream=quiet)
    for _ in range(100):
        bar.step()
    bar.close()
    assert quiet.getvalue() == ""


def test_calibration_in_a_log_reports_progress(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.0)
    rc = cli.main([str(DIGITS / "digits_cnn.onnx"), "-o", str(tmp_path / "b"), "--quantize", "int8",
                   "--calibration", str(DIGITS / "digits_calibration.npz")])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "calibrating (minmax): 1/160" in err and "calibrating (minmax): 160/160" in err


def test_too_few_samples_warn(digits, tmp_path, capsys):
    x = np.load(DIGITS / "digits_calibration.npz")["image"][:2]
    r = quantize_step(digits, "web", "int8", {"image": x})
    assert any("only 1 samples calibrate" in w for w in r.info["warnings"])
    assert any("rests on 1 samples" in w for w in r.info["warnings"])
    np.save(tmp_path / "two.npy", x)
    rc = cli.main([str(DIGITS / "digits_cnn.onnx"), "-o", str(tmp_path / "b"), "--quantize", "int8",
                   "--calibration", str(tmp_path / "two.npy")])
    err = capsys.readouterr().err
    assert rc == 0 and "warning: only 1 samples calibrate" in err and "warning: the accuracy report rests on 1" in err
    assert json.loads((tmp_path / "b" / "manifest.json").read_text())["precision"]["warnings"]
    many = quantize_step(digits, "web", "int8", DIGITS / "digits_calibration.npz")
    assert "warnings" not in many.info


def test_evaluation_set_is_separate(tmp_path, capsys):
    out = tmp_path / "b"
    rc = cli.main([str(DIGITS / "digits_cnn.onnx"), "-o", str(out), "--quantize", "int8",
                   "--calibration", str(DIGITS / "digits_calibration.npz"),
                   "--evaluation", str(DIGITS / "digits_test.npz")])
    err = capsys.readouterr().err
    assert rc == 0, err
    m = json.loads((out / "manifest.json").read_text())
    assert m["precision"]["evaluation"]["samples"] == 540 and m["precision"]["evaluation"]["labels"]
    assert m["accuracy"]["samples"] == 540 and "all 200 calibration samples calibrate" in m["accuracy"]["data"]
    acc = m["accuracy"]["outputs"]
    name = next(iter(acc))
    assert acc[name]["accuracy_float32"] > 0.9 and acc[name]["accuracy_bundle"] > 0.9   # real labelled digits
    assert "accuracy (int8 vs float32, 540 samples)" in err


def test_auto_keeps_int8_within_the_budget(digits):
    r = quantize_step(digits, "web", "auto", DIGITS / "digits_calibration.npz")
    assert r.mode == "int8" and r.info["tried"][0]["mode"] == "int8" and r.info["tried"][0]["within_budget"]
    assert "within the budget" in r.info["reason"]


def test_auto_falls_back_and_says_why(digits):
    lines: list[str] = []
    r = quantize_step(digits, "web", "auto", DIGITS / "digits_calibration.npz", accuracy_budget="cosine=1.0",
                      log=lines.append)
    assert r.mode in ("fp16", "none")
    assert r.info["tried"][0] == {"mode": "int8", "within_budget": False,
                                  "measured": r.info["tried"][0]["measured"]}
    assert "cosine" in r.info["tried"][0]["measured"] and "< 1.0" in r.info["tried"][0]["measured"]
    assert any(s.startswith("auto: int8 misses the accuracy budget on 40 evaluation samples") for s in lines)
    if r.mode == "none":
        assert "both miss the accuracy budget" in r.info["reason"]


@pytest.mark.parametrize("spec", ["", "top5=0.9", "top1=1.5", "cosine=abc", "top1"])
def test_bad_budget_is_a_clear_error(spec, tmp_path, capsys):
    with pytest.raises(PackagerError, match="budget"):
        parse_budget(spec)
    rc = cli.main([str(DIGITS / "digits_cnn.onnx"), "-o", str(tmp_path / "b"), "--accuracy-budget", spec])
    assert rc == 1 and "error:" in capsys.readouterr().err and not (tmp_path / "b").exists()


@pytest.mark.parametrize("budget,mode", [("top1=0.99,cosine=0.99", "int8"), ("cosine=1.0", "none")])
def test_cli_auto_end_to_end(budget, mode, tmp_path, capsys):
    """`package MODEL --calibration DATA --evaluation DATA --accuracy-budget B` (--quantize auto is the default): the
    bundle ships what auto chose, the manifest and stderr say why, and the bundle's wasm answers like onnxruntime's
    float32 model on held-out digits (int8 within the budget it was chosen for; float32 to rounding)."""
    import onnx

    from packager import load_bundle
    from packager.reference import reference_run
    out = tmp_path / "b"
    rc = cli.main([str(DIGITS / "digits_cnn.onnx"), "-o", str(out),
                   "--calibration", str(DIGITS / "digits_calibration.npz"), "--evaluation", str(DIGITS / "digits_test.npz"), "--accuracy-budget", budget])
    err = capsys.readouterr().err
    assert rc == 0, err
    p = json.loads((out / "manifest.json").read_text())["precision"]
    assert p["requested"] == "auto" and p["mode"] == mode and p["tried"][0]["mode"] == "int8", p
    assert p["tried"][0]["within_budget"] == (mode == "int8")
    if mode == "int8":
        assert "within the budget" in p["reason"]
    else:
        assert "both miss the accuracy budget" in p["reason"] and "auto: int8 misses the accuracy budget" in err
    b, source = load_bundle(out), onnx.load(str(DIGITS / "digits_cnn.onnx"))
    images = np.load(DIGITS / "digits_test.npz")["image"][:60]
    got = np.concatenate([b.run({"image": x[None]})["logits"] for x in images])
    want = np.concatenate([reference_run(source, {"image": x[None]})["logits"] for x in images])
    if mode == "int8":
        assert (got.argmax(1) == want.argmax(1)).mean() >= 0.99
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
