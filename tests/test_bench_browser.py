"""bench/browser_bench.py end to end on two small models: both packaged, run in headless Chromium against
onnxruntime-web in one page, per-model ratios, the count at or under 0.5x and the geometric mean printed and
written to JSON (the harness, not its figures: the run is far too short to mean anything)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser_env import chromium_missing
from tests.conftest import model_path

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(bool(chromium_missing()) or not (REPO / "bench" / "node_modules" / "onnxruntime-web").is_dir(),
                                reason=chromium_missing() or "bench/node_modules missing (scripts/setup.sh)")


def test_two_models_in_chromium(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from bench.browser_bench import main
    for n in ("cifar10net", "cifar10net_unfused"):
        model_path(n)
    out = tmp_path / "browser.json"
    main(["--models", "cifar10net,cifar10net_unfused", "--seconds", "0.3", "--rounds", "2", "--slice", "0.1",
          "--load-reps", "0", "--json", str(out)])
    printed = capsys.readouterr().out
    rep = json.loads(out.read_text())
    rows = rep["latency"]
    assert set(rows) == {"cifar10net", "cifar10net_unfused"}
    for n, r in rows.items():
        assert "error" not in r, (n, r)
        assert r["ratio"] > 0 and r["edgepack_ms"] > 0 and r["ort_web_ms"] > 0 and r["max_abs_diff"] < 1e-4
        assert f"{n:<13}" in printed
    s = rep["latency_summary"]
    assert s["ran"] == 2 and s["at_or_under_half"] == sum(r["ratio"] <= 0.5 for r in rows.values())
    assert s["geomean"] == pytest.approx((rows["cifar10net"]["ratio"] * rows["cifar10net_unfused"]["ratio"]) ** 0.5)
    assert f"2 of 2 ran at 1 thread(s); {s['at_or_under_half']} at or under 0.5" in printed
    assert rep["loading"] == {} and "threaded_summary" not in rep
