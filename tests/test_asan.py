"""The ASan + UBSan build of edgepack-run (edge/build/asan/edgepack-run) runs the whole ONNX backend
conformance suite and every benchmark model clean: no sanitizer report, the same pass count as the wasm
runner, and the benchmark models within 1e-4 of onnxruntime.

    python -m tests.conformance.runner_asan --jobs 2     # the same suite by hand, with a per-case table"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest

from packager import package
from packager.reference import reference_run
from packager.bundle import Bundle

from .conformance import runner_asan
from .conftest import model_path, seeded_feeds
from .test_conformance import KNOWN_FAILURES

MODELS = ["cifar10net", "cifar10net_unfused", "mobilenetv2", "resnet18", "minilm_like"]
TOL = 1e-4


@pytest.fixture(scope="module")
def cli() -> Path:
    return runner_asan.build_cli()


def test_conformance_suite_clean_under_asan() -> None:
    results = runner_asan.run_all(None, jobs=max(1, min(4, os.cpu_count() or 1)))
    assert len(results) > 1000
    san = [(r["case"], r["asan_why"]) for r in results if r["asan"] == "sanitizer"]
    assert not san, san[:3]
    bad = [(r["case"], r["asan"], r["asan_why"][:200]) for r in results
           if r["asan"] in ("fail", "crash") and r["case"] not in KNOWN_FAILURES]
    assert not bad, bad[:5]
    wasm_pass = sum(r["wasm"] == "pass" for r in results)
    asan_pass = sum(r["asan"] == "pass" for r in results)
    assert asan_pass == wasm_pass, [(r["case"], r["wasm"], r["asan"], r["asan_why"][:200])
                                    for r in results if r["wasm"] != r["asan"]][:5]


@pytest.mark.parametrize("name", MODELS)
def test_benchmark_model_under_asan(name: str, cli: Path, tmp_path: Path) -> None:
    path = package(model_path(name), target="web", out=tmp_path / name, verify=False, dynamic=False)
    b = Bundle(path)
    feeds = seeded_feeds(b.inputs, 1)
    status, why, got = runner_asan.run_asan_cli(cli, path, feeds, b.outputs, timeout=600)
    assert status == "ok", why
    want = reference_run(onnx.load(str(model_path(name))), feeds)   # the source model, before optimization
    for k, w in want.items():
        np.testing.assert_allclose(got[k], w, rtol=TOL, atol=TOL, err_msg=f"{name} (ASan edgepack-run) output {k}")
