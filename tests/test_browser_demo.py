"""The web demo (demo/build.py + demo/index.html + demo.js) in headless Chromium, served like scripts/serve.py
serves it (COOP/COEP): it loads, classifies every sample with edgepack and with onnxruntime-web, both agree,
and the digits CNN (when demo/digits has landed) gets its held-out images right."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .browser_env import chromium, chromium_missing, serving

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "out"
    r = subprocess.run([sys.executable, str(REPO / "demo" / "build.py"), "--out", str(out)], capture_output=True,
                       text=True, timeout=600, cwd=REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def test_demo_page_classifies_with_edgepack_and_onnxruntime_web(demo) -> None:
    with serving({"/": demo}, isolate_all=True) as url, chromium() as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url + "/")
        page.wait_for_function("document.body.dataset.state !== 'loading'", timeout=300_000)
        state = page.evaluate("document.body.dataset.state")
        assert state == "done", page.evaluate("window.demoError")
        results = {m["name"]: {r["runtime"]: r for r in m["results"]} for m in page.evaluate("window.demoResults")}
        # clicking a sample classifies it again with every runtime that runs
        page.locator(".sample").nth(3).click()
        page.wait_for_function("document.querySelector('.pred').textContent.startsWith('sample 3')")
        shown = page.locator(".pred").first.text_content()
        page.close()
    assert not errors, errors
    assert "cifar10net" in results
    if (REPO / "demo" / "digits" / "digits_cnn.onnx").exists():
        assert "digits" in results
    assert "edgepack wasm" in shown and "onnxruntime-web wasm" in shown
    for name, rows in results.items():
        ep, ort = rows["edgepack wasm"], rows["onnxruntime-web wasm"]
        assert "error" not in ep and "error" not in ort, (ep, ort)
        assert ep["features"].startswith("wasm ") and ort["features"].startswith("wasm SIMD")
        assert ep["loadMs"] > 0 and ep["latencyMs"] > 0 and ort["latencyMs"] > 0
        for label, r in rows.items():   # threads / WebGPU rows: not available here, or they agree too
            if "error" in r:
                assert label not in ("edgepack wasm", "onnxruntime-web wasm"), (label, r)
                continue
            assert r["agreement"] == 1 and r["maxAbsDiff"] < 1e-4, (name, label, r)
        if name == "digits":
            assert ep["accuracy"] >= 0.9 and ep["accuracy"] == ort["accuracy"], ep


def test_serve_script_headers(demo) -> None:
    """scripts/serve.py (what demo.sh tells users to run): wasm MIME type and the isolation headers."""
    import re
    import urllib.request
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts" / "serve.py"), str(demo), "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://[0-9.]+:\d+/", line).group(0)
        with urllib.request.urlopen(url) as r:
            assert r.headers["Cross-Origin-Opener-Policy"] == "same-origin"
            assert r.headers["Cross-Origin-Embedder-Policy"] == "require-corp"
            assert b"edgepack" in r.read()
        with urllib.request.urlopen(url + "models/cifar10net/bundle/edgepack.wasm") as r:
            assert r.headers["Content-Type"] == "application/wasm" and r.read(4) == b"\0asm"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
