"""The web runtime's loading in real Chromium, on a bundle made by the `package` CLI and compared with onnxruntime:
each file fetched once (only the wasm build that runs; Playwright counts the requests), onProgress as the plan
streams, a bundle cached with the Cache API loading without the network, SHA-256 checks on a plain-http LAN origin
(no crypto.subtle) and a signature request refused there before any download, the image helper on a canvas, and
Vite: a build with no "externalized" warnings, and the dev server with a bundle installed from a folder outside
the project (server.fs.allow, web/README.md)."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import onnx
import pytest

from packager.reference import reference_run
from packager.signing import generate_keypair

from .browser_env import ISOLATED, chromium, chromium_missing, serving
from .conftest import model_path
from .test_web_api import cli_package

REPO = Path(__file__).resolve().parent.parent
VITE = REPO / "web" / "node_modules" / ".bin" / "vite"
NPM_FLAGS = ("--no-audit", "--no-fund", "--offline", "--loglevel=error")

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))

INDEX = '<!doctype html><meta charset="utf-8"><title>t</title>\n'
PIXELS = "Float32Array.from({ length: 3072 }, (_, i) => Math.sin(i))"   # the input every page feeds


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict:
    """cifar10net packaged and signed by the CLI, a copy with a flipped plan byte, a page and the runtime."""
    work = tmp_path_factory.mktemp("webapi")
    generate_keypair(work / "k.pem", work / "k.pub")
    b = cli_package(model_path("cifar10net"), work / "b", "--no-verify", "--emit-onnx", "--sign", str(work / "k.pem"))
    t = work / "t"
    shutil.copytree(b, t)
    plan = bytearray((t / "model.plan").read_bytes())
    plan[len(plan) // 2] ^= 1
    (t / "model.plan").write_bytes(bytes(plan))
    root = work / "root"
    root.mkdir()
    (root / "index.html").write_text(INDEX)
    x = np.sin(np.arange(3072, dtype=np.float32).astype(np.float64)).astype(np.float32).reshape(1, 3, 32, 32)
    want = reference_run(onnx.load(str(b / "model.onnx")), {"image": x})["logits"]
    return {"bundle": b, "key": (work / "k.pub").read_text().strip(), "want": want,
            "mounts": {"/": root, "/edgepack": REPO / "web" / "src", "/b": b, "/t": t}}


LOAD = """async ([url, options]) => {
  const { load } = await import('/edgepack/index.js');
  const progress = [];
  try {
    const s = await load(url, { ...options, onProgress: (p) => progress.push(p) });
    const out = await s.run({ image: { data: %s, dims: [1, 3, 32, 32] } });
    return { logits: Array.from(out.logits.data), variant: s.variant, notes: s.notes, progress };
  } catch (e) { return { error: `${e.name}: ${e.message}`, progress }; }
}""" % PIXELS


def _requests(page) -> list[str]:
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    return seen


def _bundle_files(urls: list[str], prefix: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for u in urls:
        path = u.split("?", 1)[0].split("/", 3)[3]
        if path.startswith(prefix):
            counts[path[len(prefix):]] = counts.get(path[len(prefix):], 0) + 1
    return counts


def _check(res: dict, want: np.ndarray) -> None:
    assert "error" not in res, res.get("error")
    np.testing.assert_allclose(np.array(res["logits"], np.float32).reshape(want.shape), want, rtol=1e-4, atol=1e-4)


def test_each_file_fetched_once_with_progress(site) -> None:
    """Signed (publicKey) and unsigned loads: manifest.json, manifest.sig, model.plan and ONE wasm build, each once;
    no other build, no model.onnx. onProgress follows the plan as it streams."""
    manifest = json.loads((site["bundle"] / "manifest.json").read_text())
    with serving(site["mounts"]) as url, chromium() as browser:
        # the third: a cross-origin isolated page, where the one build fetched is the threaded one
        for options, expect_sig, iso in (({"publicKey": site["key"]}, True, ""), ({}, False, ""), ({}, False, ISOLATED)):
            page = browser.new_page()
            urls = _requests(page)
            page.goto(url + iso + "/index.html")
            res = page.evaluate(LOAD, ["/b/", options])
            page.close()
            _check(res, site["want"])
            files = _bundle_files(urls, "b/")
            wasm = {"relaxed": "edgepack-relaxed.wasm", "simd": "edgepack.wasm", "scalar": "edgepack-scalar.wasm",
                    "threads-relaxed": "edgepack-threads-relaxed.wasm", "threads": "edgepack-threads.wasm"}[res["variant"]]
            assert ("threads" in res["variant"]) == bool(iso), res["variant"]
            assert files == {"manifest.json": 1, "model.plan": 1, wasm: 1, **({"manifest.sig": 1} if expect_sig else {})}, files
            # progress: per file up to its size, overall up to plan + wasm, the 3 MB plan in more than one step
            prog = res["progress"]
            total = manifest["files"]["model.plan"]["bytes"] + manifest["files"][wasm]["bytes"]
            assert [p["bytesLoaded"] for p in prog] == sorted(p["bytesLoaded"] for p in prog)
            assert prog[-1]["bytesLoaded"] == prog[-1]["bytesTotal"] == total
            plan = [p for p in prog if p["file"] == "model.plan"]
            assert len(plan) >= 2 and plan[-1]["loaded"] == plan[-1]["total"] == manifest["files"]["model.plan"]["bytes"]
            assert {p["file"] for p in prog} == {"model.plan", wasm}


def test_cached_bundle_loads_without_the_network(site) -> None:
    with serving(site["mounts"]) as url, chromium() as browser:
        page = browser.new_page()
        page.goto(url + "/index.html")
        first = page.evaluate(LOAD, ["/b/", {"cache": "edgepack-test"}])
        _check(first, site["want"])
        assert not any(n.startswith("cache:") for n in first["notes"]), first["notes"]
        blocked: list[str] = []

        def refuse(route) -> None:
            blocked.append(route.request.url)
            route.abort()

        page.route("**/b/**", refuse)   # the bundle's server is gone
        again = page.evaluate(LOAD, ["/b/", {"cache": "edgepack-test"}])
        _check(again, site["want"])
        assert blocked == [] and again["progress"][-1]["bytesLoaded"] == first["progress"][-1]["bytesLoaded"]
        off = page.evaluate(LOAD, ["/b/", {}])   # without the cache option: the network, which fails
        page.close()
    assert off["error"].startswith("EdgepackError: ") and "manifest.json: fetch failed" in off["error"], off
    assert len(blocked) == 1


# A host name the browser maps to this machine: its plain-http origin is not a secure context (no crypto.subtle), as a
# phone's page on a LAN address is; 127.0.0.1 and localhost would be (the test ran only where a LAN address existed).
LAN_HOST = "edgepack-lan.test"


def test_plain_http_lan_origin_hashes_without_webcrypto(site) -> None:
    with serving(site["mounts"]) as url, chromium((f"--host-resolver-rules=MAP {LAN_HOST} 127.0.0.1",)) as browser:
        page = browser.new_page()
        urls = _requests(page)
        page.goto(url.replace("127.0.0.1", LAN_HOST) + "/index.html")
        assert page.evaluate("[window.isSecureContext, typeof crypto.subtle]") == [False, "undefined"]
        ok = page.evaluate(LOAD, ["/b/", {}])
        tampered = page.evaluate(LOAD, ["/t/", {}])
        before = len(urls)
        signed = page.evaluate(LOAD, ["/b/", {"publicKey": site["key"]}])
        after = urls[before:]
        page.close()
    _check(ok, site["want"])
    assert tampered["error"] == "EdgepackError: bundle file model.plan does not match its SHA-256 in manifest.json (tampered or corrupt)"
    assert signed["error"].startswith("EdgepackError: publicKey: checking a signature needs WebCrypto (crypto.subtle)"), signed
    assert "every file is still checked against its SHA-256" in signed["error"]
    assert not [u for u in after if "/b/" in u], after   # said before downloading anything


def test_image_helper_on_a_canvas_runs_like_onnxruntime(site) -> None:
    """imageToTensor on a real canvas (and on its ImageData, an HTMLImageElement, and NHWC): the tensor numpy
    computes from the same pixels, and the bundle's answer on it is onnxruntime's."""
    script = """async () => {
      const { load, imageToTensor } = await import('/edgepack/index.js');
      const c = document.createElement('canvas'); c.width = 32; c.height = 32;
      const ctx = c.getContext('2d');
      const img = ctx.createImageData(32, 32);
      for (let i = 0; i < img.data.length; i++) img.data[i] = i % 4 === 3 ? 255 : (i * 37) % 256;
      ctx.putImageData(img, 0, 0);
      const opts = { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] };
      const t = imageToTensor(c, opts);
      const same = imageToTensor(ctx.getImageData(0, 0, 32, 32), opts);
      const nhwc = imageToTensor(img, { ...opts, layout: 'NHWC' });
      const el = new Image();   // an HTMLImageElement: the same pixels through a lossless PNG
      el.src = c.toDataURL('image/png');
      await el.decode();
      const fromElement = imageToTensor(el, opts);
      const s = await load('/b/');
      const out = await s.run({ image: t });
      return { dims: t.dims, data: Array.from(t.data), same: Array.from(same.data),
               element: Array.from(fromElement.data), nhwcDims: nhwc.dims,
               nhwc: Array.from(nhwc.data), logits: Array.from(out.logits.data) };
    }"""
    with serving(site["mounts"]) as url, chromium() as browser:
        page = browser.new_page()
        page.goto(url + "/index.html")
        res = page.evaluate(script)
        page.close()
    px = (np.arange(32 * 32 * 4) * 37 % 256).reshape(32, 32, 4)[..., :3] / 255.0
    x = ((px - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]).astype(np.float32)
    assert res["dims"] == [1, 3, 32, 32] and res["nhwcDims"] == [1, 32, 32, 3]
    np.testing.assert_allclose(np.array(res["data"], np.float32).reshape(1, 3, 32, 32), x.transpose(2, 0, 1)[None], rtol=1e-5, atol=1e-5)
    assert res["same"] == res["data"] and res["element"] == res["data"]
    np.testing.assert_allclose(np.array(res["nhwc"], np.float32).reshape(1, 32, 32, 3), x[None], rtol=1e-5, atol=1e-5)
    want = reference_run(onnx.load(str(site["bundle"] / "model.onnx")), {"image": x.transpose(2, 0, 1)[None]})["logits"]
    np.testing.assert_allclose(np.array(res["logits"], np.float32).reshape(want.shape), want, rtol=1e-4, atol=1e-4)


VITE_MAIN = """import load, { inputs } from 'cifar10net';
import { detectVariant, VERSION } from 'edgepack';
try {
  const s = await load({ backend: 'wasm' });
  const dims = inputs[0].shape.map((d) => (typeof d === 'number' ? d : 1));   // 'batch' is resolved per run
  const out = await s.run({ image: { data: %s, dims } });
  window.result = { logits: Array.from(out.logits.data), best: detectVariant(), VERSION };
} catch (e) { window.result = { error: `${e.name}: ${e.message}` }; }
""" % PIXELS
# the dev-server app uses the model package alone (its own copy of the runtime, inside the bundle folder)
VITE_DEV_MAIN = "\n".join(ln for ln in VITE_MAIN.splitlines() if "from 'edgepack'" not in ln).replace(
    ", best: detectVariant(), VERSION", "") + "\n"


def _vite_app(tmp: Path, bundle: Path, config: str, main: str = VITE_MAIN) -> Path:
    """An app with the runtime package (from web/) and the model package installed from a folder OUTSIDE the app
    (npm links it: its files live outside Vite's root)."""
    app = tmp / "app"
    app.mkdir()
    (app / "package.json").write_text(json.dumps({"name": "app", "private": True, "type": "module"}))
    (app / "index.html").write_text('<!doctype html><meta charset="utf-8"><script type="module" src="/main.js"></script>\n')
    (app / "main.js").write_text(main)
    (app / "vite.config.js").write_text(config)
    r = subprocess.run(["npm", "install", *NPM_FLAGS, f"cifar10net@file:{bundle}", f"edgepack@file:{REPO / 'web'}"],
                       cwd=app, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (app / "node_modules" / "cifar10net").is_symlink()
    return app


def test_vite_build_prints_no_externalized_warnings(site, tmp_path) -> None:
    if not VITE.exists():
        pytest.fail("vite is not installed: run scripts/setup.sh (npm ci in web/)")
    app = _vite_app(tmp_path, site["bundle"], "export default { build: { target: 'es2022' } };\n")
    r = subprocess.run([str(VITE), "build"], cwd=app, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "externalized" not in r.stdout + r.stderr and "node:" not in r.stdout + r.stderr, r.stdout + r.stderr
    with serving({"/": app / "dist"}) as url, chromium() as browser:
        page = browser.new_page()
        page.goto(url + "/index.html")
        page.wait_for_function("window.result !== undefined", timeout=120_000)
        res = page.evaluate("window.result")
        page.close()
    _check(res, site["want"])


# What web/README.md tells Vite dev-server users whose bundle is installed from a folder outside the project.
DEV_CONFIG = """export default {
  optimizeDeps: { exclude: ['cifar10net'] },
  server: { fs: { allow: [process.cwd(), %s] } },
};
"""


def _dev_server(app: Path):
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    n = port.getsockname()[1]
    port.close()
    proc = subprocess.Popen([str(VITE), "--host", "127.0.0.1", "--port", str(n), "--strictPort"], cwd=app,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{n}"
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/", timeout=1)
            return proc, url
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGTERM)
    pytest.fail(f"vite dev server did not start: {proc.stdout.read() if proc.stdout else ''}")


@pytest.mark.parametrize("allow", [True, False])
def test_vite_dev_server_with_a_bundle_outside_the_project(allow, site, tmp_path) -> None:
    if not VITE.exists():
        pytest.fail("vite is not installed: run scripts/setup.sh (npm ci in web/)")
    readme = (REPO / "web" / "README.md").read_text()   # the settings tested are the ones the README gives
    for line in DEV_CONFIG.splitlines()[1:3]:
        assert line.split("%s")[0].strip() in readme, line
    config = DEV_CONFIG % (json.dumps(str(site["bundle"])) if allow else "")
    app = _vite_app(tmp_path, site["bundle"], config, VITE_DEV_MAIN)
    proc, url = _dev_server(app)
    try:
        with chromium() as browser:
            page = browser.new_page()
            refused: list[str] = []
            page.on("response", lambda r: refused.append(r.url) if r.status == 403 else None)
            page.goto(url + "/index.html")
            try:
                page.wait_for_function("window.result !== undefined", timeout=60_000)
                res = page.evaluate("window.result")
            except Exception as e:  # noqa: BLE001 - the app's modules never ran
                res = {"error": f"no result: {e}"[:300]}
            page.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    if allow:
        _check(res, site["want"])
    else:   # Vite refuses files outside its allow list (HTTP 403): what web/README.md's server.fs.allow is for
        assert refused and all("/@fs/" in u for u in refused), (refused, res)
        assert re.match(r"EdgepackError: http://127\.0\.0\.1:\d+/@fs/.*/manifest\.json: HTTP 403: Vite's dev server serves "
                        r"no file outside server\.fs\.allow; add the bundle's folder \((.*)\) to server\.fs\.allow", res["error"]), res
        assert f"({site['bundle']})" in res["error"], res
