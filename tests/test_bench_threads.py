"""bench/zoo.py's --threads table: the threaded speed-up timed alone (a Node process running edgepack only) and
beside onnxruntime (the process that also runs its 2-thread pools), each with its per-round spread (node_bench.mjs
paired_min / paired_max), so a run whose rounds switched between a fast and a slow mode shows as a wide range; and
node_bench.mjs --ort-spin off, onnxruntime's sessions without spin-waiting threads."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

REPO = Path(__file__).resolve().parent.parent


def _rep(one_ms: float, two_ms: float, ratio: dict, others: bool = False) -> dict:
    rt = {"edgepack-simd": {"median_ms": one_ms * 1.1}, "edgepack-relaxed": {"median_ms": one_ms},
          "edgepack-threads": {"median_ms": two_ms}}
    ra = {"edgepack-relaxed/edgepack-threads": ratio}
    if others:
        rt |= {"ort-web": {"median_ms": two_ms * 2}, "native": {"median_ms": two_ms / 2}}
        ra |= {"edgepack-threads/ort-web": {"paired_median": 0.5}, "edgepack-threads/native": {"paired_median": 2.0}}
    return {"runtimes": rt, "ratios": ra}


def test_zoo_threads_table_alone_and_beside_onnxruntime() -> None:
    from bench.zoo import threads_table
    both = {"model": "both", **_rep(3.0, 2.5, {"paired_median": 1.2, "paired_min": 1.05, "paired_max": 1.6}, others=True),
            "alone": _rep(2.9, 1.8, {"paired_median": 1.6, "paired_min": 1.5, "paired_max": 1.7})}
    alone_only = {"model": "alone only", "alone": _rep(10.0, 5.0, {"paired_median": 2.0})}   # no spread: older json
    beside_only = {"model": "beside only", **_rep(4.0, 2.0, {"paired_median": 1.8, "paired_min": 1.7, "paired_max": 1.9})}
    failed = {"model": "failed", "alone": {"error": "node_bench.mjs (edgepack alone) failed"}}
    md = threads_table([both, alone_only, beside_only, failed], 2, "test machine").splitlines()
    assert md[0].count("|") == md[1].count("|") == md[2].count("|") == md[5].count("|") == 16
    assert "| speed-up alone | per round (min-max) | speed-up beside onnxruntime | per round (min-max) |" in md[0]
    # 1-thread and threaded times from the process running edgepack alone; onnxruntime's from the other
    assert md[2].startswith("| both | 2.90 (relaxed) | 1.80 | 1.60 | 1.50-1.70 | 1.20 | 1.05-1.60 | 5.00 | 0.50 | 1.25 | 2.00 |")
    assert md[3].startswith("| alone only | 10.00 (relaxed) | 5.00 | 2.00 |  | n/a | | n/a | n/a | n/a | n/a |")
    assert md[4].startswith("| beside only | 4.00 (relaxed) | 2.00 | n/a | | 1.80 | 1.70-1.90 |")
    assert md[5].startswith("| failed | no threaded run |")
    assert md[-1].startswith("2 models alone, geometric-mean speed-up of 2 threads over our best 1-thread build: 1.79x; "
                             "2 models beside onnxruntime: 1.47x (test machine)")


def test_zoo_threads_run_needs_threads() -> None:
    from bench.zoo import main
    with pytest.raises(SystemExit, match="give --threads N"):
        main(["--models", "none", "--threads-run", "alone"])


@pytest.mark.skipif(not shutil.which("node"), reason="needs node")
def test_node_bench_ort_spin_off(tmp_path: Path) -> None:
    """--ort-spin off reaches both onnxruntime sessions (they accept the config entry and still agree with edgepack);
    a bad value and a negative --pause are refused."""
    from bench.run import node_flags
    from packager import package
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, str(tmp_path / "relu.onnx"))
    bundle = package(tmp_path / "relu.onnx", out=tmp_path / "b", verify=False, dynamic=False)
    base = ["node", *node_flags(), str(REPO / "bench" / "node_bench.mjs"), str(tmp_path / "relu.onnx"), str(bundle),
            "--seconds", "0.05", "--rounds", "2", "--slice", "0.02", "--variants", "simd", "--threads", "2"]
    out = tmp_path / "r.json"
    subprocess.run([*base, "--ort-spin", "off", "--pause", "5", "--json", str(out)], check=True, capture_output=True,
                   cwd=REPO / "bench", timeout=120)
    rep = json.loads(out.read_text())
    assert rep["settings"]["ort_spin"] is False and rep["settings"]["pause_ms"] == 5
    assert "no spinning" in rep["runtimes"]["ort-web"]["detail"]
    assert "native" not in rep["runtimes"] or "no spinning" in rep["runtimes"]["native"]["detail"]
    assert "edgepack-simd/edgepack-threads" in rep["ratios"]
    for bad in (["--ort-spin", "maybe"], ["--pause", "-1"]):
        r = subprocess.run([*base, *bad], capture_output=True, text=True, cwd=REPO / "bench", timeout=120)
        assert r.returncode != 0 and bad[0] in r.stderr
