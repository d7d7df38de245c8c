"""Every benchmark model matches onnxruntime (CPU) within 1e-4 abs/rel, on the SIMD and the scalar wasm builds."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from packager import load_bundle, package
from packager.reference import reference_run

from .conftest import model_path, seeded_feeds

MODELS = ["cifar10net", "cifar10net_unfused", "mobilenetv2", "resnet18", "minilm_like"]
TOL = 1e-4


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    return {}


def _bundle(name: str, bundles: dict, tmp_path_factory) -> Path:
    if name not in bundles:
        bundles[name] = package(model_path(name), out=tmp_path_factory.mktemp(name) / name, dynamic=False)
    return bundles[name]


@pytest.mark.parametrize("variant", ["simd", "scalar"])
@pytest.mark.parametrize("name", MODELS)
def test_model_matches_onnxruntime(name: str, variant: str, bundles, tmp_path_factory) -> None:
    path = _bundle(name, bundles, tmp_path_factory)
    b = load_bundle(path, variant)
    import onnx
    ref_model = onnx.load(str(model_path(name)))   # the source model: an optimizer pass that changed the math fails here
    for seed in (1, 2):
        feeds = seeded_feeds(b.inputs, seed)
        got = b.run(feeds)
        want = reference_run(ref_model, feeds)
        for k, w in want.items():
            np.testing.assert_allclose(got[k], w, rtol=TOL, atol=TOL, err_msg=f"{name} [{variant}] output {k}")
