"""A bundle installed as an npm package and built into a web app by a bundler (Vite): the bundler finds the
model's files through `new URL('./…', import.meta.url)` and ships them as hashed assets, the optional runtime
parts (WebGPU, threads) become lazy chunks, and the built app classifies in Chromium like onnxruntime does."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest

from packager import package
from packager.reference import reference_run

from .browser_env import chromium, chromium_missing, serving
from .conftest import model_path

REPO = Path(__file__).resolve().parent.parent
VITE = REPO / "web" / "node_modules" / ".bin" / "vite"
NPM_FLAGS = ("--no-audit", "--no-fund", "--offline", "--loglevel=error")

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))

MAIN_JS = """import load, { inputs } from 'cifar10net';
try {
  const s = await load({ backend: 'auto', threads: 'auto' });
  const out = await s.run({ image: { data: new Float32Array(3072).map((_, i) => Math.sin(i)), dims: inputs[0].shape } });
  window.result = { backend: s.backend, variant: s.variant, features: s.features, logits: Array.from(out.logits.data) };
} catch (e) { window.result = { error: `${e.name}: ${e.message}` }; }
"""


def test_vite_app_ships_the_bundle_and_runs_in_chromium(tmp_path) -> None:
    if not VITE.exists():
        pytest.fail("vite is not installed: run scripts/setup.sh (npm ci in web/)")
    bundle = package(model_path("cifar10net"), out=tmp_path / "cifar10net", verify=False, dynamic=False, emit_onnx=True)
    r = subprocess.run(["npm", "pack", "--pack-destination", str(tmp_path), *NPM_FLAGS], cwd=bundle, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text(json.dumps({"name": "app", "private": True, "type": "module"}))
    (app / "index.html").write_text('<!doctype html><meta charset="utf-8"><title>app</title><script type="module" src="/main.js"></script>\n')
    (app / "main.js").write_text(MAIN_JS)
    (app / "vite.config.js").write_text("export default { build: { target: 'es2022' } };\n")
    r = subprocess.run(["npm", "install", *NPM_FLAGS, str(tmp_path / r.stdout.strip().splitlines()[-1])], cwd=app,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(VITE), "build", "--logLevel", "warn"], cwd=app, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assets = [p.name for p in (app / "dist" / "assets").iterdir()]
    for f in ("model-", "manifest-", "edgepack-"):   # hashed copies of model.plan, manifest.json, the .wasm builds
        assert any(a.startswith(f) for a in assets), (f, assets)
    assert sum(a.endswith(".wasm") for a in assets) >= 3, assets
    with serving({"/": app / "dist"}, isolate_all=True) as url, chromium() as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url + "/index.html")
        page.wait_for_function("window.result !== undefined", timeout=120_000)
        res = page.evaluate("window.result")
        page.close()
    assert not errors and "error" not in res, (errors, res)
    x = np.sin(np.arange(3072, dtype=np.float32).astype(np.float64)).astype(np.float32).reshape(1, 3, 32, 32)
    want = reference_run(onnx.load(str(bundle / "model.onnx")), {"image": x})["logits"]
    assert res["backend"] == "wasm"
    np.testing.assert_allclose(np.array(res["logits"], np.float32).reshape(want.shape), want, rtol=1e-4, atol=1e-4)
