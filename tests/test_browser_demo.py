"""The web demo (demo/build.py + demo/index.html + demo.js) in headless Chromium, served like scripts/serve.py
serves it (COOP/COEP), driven like a visitor: digits drawn on the canvas with the mouse are recognised, a speech
file's voice-activity trace is high on the speech and low on the silence, a dropped image gets boxes, edgepack's
answers match onnxruntime-web's, the WebGPU status agrees with the WebGPU rows; a screenshot is saved to
.cache/demo-screenshot.png."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from .browser_env import CHROMIUM, CHROMIUM_ARGS, chromium, chromium_missing, serving

REPO = Path(__file__).resolve().parent.parent
SCREENSHOT = REPO / ".cache" / "demo-screenshot.png"
EDGEPACK, ORT = "edgepack wasm", "onnxruntime-web wasm"

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))


def _arc(cx: float, cy: float, rx: float, ry: float, a0: float = 0.0, a1: float = 2 * math.pi, n: int = 16):
    return [(cx + rx * math.sin(a0 + (a1 - a0) * i / n), cy - ry * math.cos(a0 + (a1 - a0) * i / n)) for i in range(n + 1)]


# Mouse strokes (canvas pixels, 280x280) in the dataset's style, each the whole digit in one stroke.
DIGITS = {
    0: _arc(140, 140, 60, 95),
    2: _arc(140, 95, 55, 50, -math.pi / 2, math.pi * 0.6, 10) + [(85, 235), (200, 235)],
    3: _arc(140, 90, 55, 45, -math.pi / 2, math.pi, 10) + _arc(140, 185, 60, 50, 0, math.pi * 1.5, 10),
    4: [(170, 235), (170, 45), (80, 170), (210, 170)],
}

DROP = """async ([url, zone]) => {
  const blob = await (await fetch(url)).blob();
  const dt = new DataTransfer();
  dt.items.add(new File([blob], url.split('/').pop(), { type: blob.type }));
  document.getElementById(zone).dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
}"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "out"
    rel = os.path.relpath(out, REPO)   # relative, as scripts/demo.sh and the docs pass it
    r = subprocess.run([sys.executable, str(REPO / "demo" / "build.py"), "--out", rel], capture_output=True,
                       text=True, timeout=900, cwd=REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _wait_runs(page, panel: str, n: int) -> None:
    page.wait_for_function(f"Number(document.getElementById('{panel}').dataset.runs) >= {n}", timeout=120_000)


def _draw(page, stroke: list[tuple[float, float]]) -> None:
    box = page.locator("#pad").bounding_box()
    k = box["width"] / 280
    pts = [(box["x"] + x * k, box["y"] + y * k) for x, y in stroke]
    page.mouse.move(*pts[0])
    page.mouse.down()
    for p in pts[1:]:
        page.mouse.move(*p, steps=4)
    page.mouse.up()


def _check_status(env: dict, status: str, rows: list[str]) -> None:
    """The status line and the runtime rows say the same thing about WebGPU and threads."""
    gpu_rows = [r for r in rows if r.startswith("edgepack WebGPU")]
    if env["webgpu"]:
        assert "WebGPU: present" in status and "not available" not in status, status
        assert len(gpu_rows) == 3, rows   # one per panel: it runs, or says why this model does not
        assert all("not available" not in r or "WebGPU is present" in r for r in gpu_rows), gpu_rows
    else:
        assert "WebGPU: not available" in status and "present" not in status and not gpu_rows, (status, rows)
    assert f"{env['threads']} thread" in " ".join(rows)


@contextmanager
def _chromium_with(args: list[str]) -> Iterator[object]:
    """Chromium launched like browser_env.chromium() with other flags (fake microphone, no WebGPU)."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        try:
            yield browser
        finally:
            browser.close()


def _open(browser, url: str):
    page = browser.new_page()
    page.goto(url + "/")
    page.wait_for_function("document.body.dataset.state !== 'loading'", timeout=300_000)
    assert page.evaluate("document.body.dataset.state") == "ready", page.evaluate("window.demo.error")
    return page


def test_demo_page_draw_speak_detect(demo) -> None:
    config = json.loads((demo / "models.json").read_text())
    with serving({"/": demo}, isolate_all=True) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url + "/")
        page.wait_for_function("document.body.dataset.state !== 'loading'", timeout=300_000)
        assert page.evaluate("document.body.dataset.state") == "ready", page.evaluate("window.demo.error")
        env = page.evaluate("window.demo.env")
        status = page.locator("#status").text_content()
        rows = page.locator("tbody tr").all_text_contents()

        digits = {}
        for i, (want, stroke) in enumerate(DIGITS.items()):
            page.click("#digits-clear")
            _draw(page, stroke)
            _wait_runs(page, "digits", i + 1)
            digits[want] = page.evaluate("window.demo.digits.answers")
            assert page.locator("#digit-answer").text_content() == str(want)

        page.set_input_files("#vad-file", str(demo / config["samples"]["speech"]))
        _wait_runs(page, "vad", 1)
        vad = page.evaluate("window.demo.vad")

        page.evaluate(DROP, [config["samples"]["image"], "detector-drop"])
        _wait_runs(page, "detector", 1)
        boxes = page.evaluate("window.demo.detector.boxes")
        view, drawn = page.evaluate("""() => {
          const cv = document.getElementById('detector-view');
          return [[cv.width, cv.height], Array.from(cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data)]; }""")
        # every runtime that runs shows its latency (last input, median so far) in each panel, side by side
        timed = page.evaluate("""() => Array.from(document.querySelectorAll('tbody tr'))
          .filter((tr) => !tr.querySelector('td.na'))
          .map((tr) => [tr.cells[0].textContent, tr.cells[1].textContent,
                        Array.from(tr.querySelectorAll('td.ms'), (td) => td.textContent)])""")
        page.locator("#detector").scroll_into_view_if_needed()
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT), full_page=True)
        bad = {}   # a file that is neither audio nor an image: one error line in the panel, nothing else changes
        for panel in ("vad", "detector"):
            page.evaluate(DROP, ["models.json", f"{panel}-drop"])
            page.wait_for_function(f"document.getElementById('{panel}-source').textContent.startsWith('error:')")
            bad[panel] = (page.locator(f"#{panel}-source").text_content(), page.evaluate(f"document.getElementById('{panel}').dataset.runs"))
        page.close()
    assert not errors, errors

    assert env["webgpu"], env   # Chromium on SwiftShader (browser_env): the WebGPU rows are exercised
    _check_status(env, status, rows)
    for label in (EDGEPACK, ORT):   # in each of the three panels, with its threads and a latency in ms
        mine = [r for r in timed if r[0] == label]
        assert len(mine) == 3 and all(f"{env['threads']} thread" in r[1] for r in mine), timed
        assert all(len(r[2]) == 2 and all(float(ms) > 0 for ms in r[2]) for r in mine), timed

    # digits: every runtime recognises every drawn digit; edgepack's logits are onnxruntime-web's
    for want, answers in digits.items():
        by = {a["label"]: a for a in answers}
        assert {a["digit"] for a in answers} == {want}, (want, answers)
        assert max(abs(a - b) for a, b in zip(by[EDGEPACK]["logits"], by[ORT]["logits"])) < 1e-4

    # voice activity: high on the speech, low on the silence around it; both runtimes trace the same curve
    frame_s = vad["frameMs"] / 1000
    (start, end), = config["samples"]["speechSpans"]
    for label, trace in vad["traces"].items():
        t = (np.arange(len(trace)) + 0.5) * frame_s
        p = np.asarray(trace)
        silence = p[(t < start - 0.2) | (t > end + 0.5)]
        speech = p[(t > start) & (t < end)]
        assert silence.size > 40 and silence.max() < 0.3, (label, silence.max())
        assert (speech > 0.5).mean() > 0.5, (label, (speech > 0.5).mean())
    assert np.abs(np.subtract(vad["traces"][EDGEPACK], vad["traces"][ORT])).max() < 1e-3

    # detector: the face is found, the same boxes by both runtimes, drawn on the canvas
    assert any(b["label"] == "FACE_FEMALE" and b["score"] > 0.5 for b in boxes[EDGEPACK]), boxes[EDGEPACK]
    assert len(boxes[EDGEPACK]) == len(boxes[ORT])
    for a, b in zip(boxes[EDGEPACK], boxes[ORT]):
        assert a["label"] == b["label"] and all(abs(a[c] - b[c]) < 1.0 for c in "xywh"), (a, b)
    px = np.asarray(drawn, np.uint8).reshape(view[1], view[0], 4)[..., :3].astype(int)
    assert (np.abs(px - [10, 102, 194]).sum(-1) < 30).sum() > 200   # the box's outline, in edgepack's colour

    assert bad["vad"][0].startswith("error: models.json: not audio this browser decodes") and bad["vad"][1] == "1", bad
    assert bad["detector"][0].startswith("error: models.json: not an image this browser decodes") and bad["detector"][1] == "1", bad

    # the screenshot is the page with content, not a blank or an error page
    from PIL import Image
    shot = np.asarray(Image.open(SCREENSHOT).convert("RGB")).astype(int)
    assert shot.shape[0] > 900 and shot.std() > 20
    assert (np.abs(shot - [10, 102, 194]).sum(-1) < 30).sum() > 500   # boxes, traces and bars were drawn


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
        with urllib.request.urlopen(url + "models/digits/bundle/edgepack.wasm") as r:
            assert r.headers["Content-Type"] == "application/wasm" and r.read(4) == b"\0asm"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_demo_microphone(demo) -> None:
    """The microphone path (getUserMedia, 16 kHz AudioContext, one frame at a time): Chromium's fake capture device
    plays the sample speech in a loop; after a few seconds the trace has speech and silence."""
    speech = demo / json.loads((demo / "models.json").read_text())["samples"]["speech"]
    args = [*CHROMIUM_ARGS, "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={speech}", "--autoplay-policy=no-user-gesture-required"]
    with serving({"/": demo}, isolate_all=True) as url, _chromium_with(args) as browser:
        page = _open(browser, url)
        page.click("#vad-mic")
        page.wait_for_function("document.getElementById('vad-source').textContent.includes('listening')", timeout=30_000)
        page.wait_for_timeout(9_000)   # the file is 8.9 s: speech and silence both heard
        page.click("#vad-stop")
        _wait_runs(page, "vad", 1)
        vad = page.evaluate("window.demo.vad")
        source = page.locator("#vad-source").text_content()
    trace = np.asarray(vad["traces"][EDGEPACK])
    assert len(trace) > 100, source   # frames of 32 ms kept coming
    assert (trace > 0.5).sum() > 20 and (trace < 0.2).sum() > 20, trace.round(2).tolist()
    assert np.abs(trace - np.asarray(vad["traces"][ORT])).max() < 1e-3


def test_demo_without_webgpu_says_so_once(demo) -> None:
    """A Chromium whose navigator.gpu finds no adapter: the status says WebGPU is not available and why, and no
    panel shows a WebGPU row (the page used to say 'WebGPU: present' next to 'not available' rows)."""
    args = [a for a in CHROMIUM_ARGS if "webgpu" not in a] + ["--disable-features=WebGPU,Vulkan"]
    with serving({"/": demo}, isolate_all=True) as url, _chromium_with(args) as browser:
        page = _open(browser, url)
        env = page.evaluate("window.demo.env")
        status = page.locator("#status").text_content()
        rows = page.locator("tbody tr").all_text_contents()
    assert not env["webgpu"], env
    _check_status(env, status, rows)
    assert len(rows) == 6 and all("not available" not in r for r in rows), rows
