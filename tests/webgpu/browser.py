"""Headless Chromium with WebGPU on SwiftShader, driving tests/webgpu/harness.js over a localhost server.

WebGPU needs a secure context: pages come from http://127.0.0.1 (data: and file: URLs get no navigator.gpu).
The flags below are the ones verified to give a SwiftShader adapter on Debian's chromium 156, headless."""
from __future__ import annotations

import base64
import functools
import http.server
import shutil
import threading
import uuid
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run",
        "--disable-sync", "--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"]


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".wasm": "application/wasm",
                      ".js": "text/javascript", ".mjs": "text/javascript", ".json": "application/json"}

    def log_message(self, *args) -> None:  # quiet
        pass


class WebGPUPage:
    """One server (serving `root`) and one page of the harness; `bundle()` publishes a bundle directory."""

    def __init__(self, root: Path, timeout_ms: int = 600_000) -> None:
        from playwright.sync_api import sync_playwright
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        (root / "web").symlink_to(REPO / "web")
        for f in ("harness.js", "harness.html"):
            shutil.copy(HERE / f, root / f)
        handler = functools.partial(_Handler, directory=str(root))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.pw = sync_playwright().start()
        self.browser = self.pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        self.page = self.browser.new_page()
        self.page.set_default_timeout(timeout_ms)
        self.console: list[str] = []
        self.page.on("console", lambda m: self.console.append(m.text))
        self.page.goto(f"{self.base}/harness.html")
        self.page.wait_for_function("window.epReady === true")

    def available(self) -> bool:
        return bool(self.page.evaluate("ep.available()"))

    def bundle(self, path: Path) -> str:
        name = f"b/{uuid.uuid4().hex[:8]}"
        (self.root / "b").mkdir(exist_ok=True)
        (self.root / name).symlink_to(Path(path).resolve())
        return f"/{name}"

    def open(self, bundle: Path, plan: bytes | None = None, **opts) -> dict:
        """Opens a bundle; `plan` hands the backend other plan bytes than the bundle's. Errors are returned
        as {'error': message, 'name': class name}."""
        url = None
        if plan is not None:
            (self.root / "f").mkdir(exist_ok=True)
            f = f"f/{uuid.uuid4().hex[:8]}.plan"
            (self.root / f).write_bytes(plan)
            url = f"/{f}"
        return self.page.evaluate("([b, o, p]) => ep.open(b, o, p)", [self.bundle(bundle), opts, url])

    def _feeds(self, feeds: dict[str, np.ndarray]) -> dict[str, str]:
        (self.root / "f").mkdir(exist_ok=True)
        urls = {}
        for name, a in feeds.items():
            f = f"f/{uuid.uuid4().hex[:8]}.bin"
            (self.root / f).write_bytes(np.ascontiguousarray(a).tobytes())
            urls[name] = f"/{f}"
        return urls

    def run(self, feeds: dict[str, np.ndarray], with_wasm: bool = False) -> dict:
        """{'gpu': {name: array}, 'wasm': ...} or {'error': message}."""
        res = self.page.evaluate("([f, w]) => ep.run(f, w)", [self._feeds(feeds), with_wasm])
        if "error" in res:
            return res
        return {side: {k: np.frombuffer(base64.b64decode(v["b64"]), dtype=np.dtype(v["dtype"])).reshape(v["dims"])
                       for k, v in outs.items()} for side, outs in res.items()}

    def run_concurrent(self, feeds_list: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
        res = self.page.evaluate("(l) => ep.runConcurrent(l)", [self._feeds(f) for f in feeds_list])
        return [{k: np.frombuffer(base64.b64decode(v["b64"]), dtype=np.dtype(v["dtype"])).reshape(v["dims"])
                 for k, v in outs.items()} for outs in res]

    def profile(self, feeds: dict[str, np.ndarray]) -> list[dict]:
        return self.page.evaluate("(f) => ep.profile(f)", self._feeds(feeds))

    def bench(self, feeds: dict[str, np.ndarray], warmup_ms: int = 3000, rounds: int = 5) -> dict:
        return self.page.evaluate("([f, w, r]) => ep.bench(f, w, r)", [self._feeds(feeds), warmup_ms, rounds])

    def close(self) -> None:
        try:
            self.page.evaluate("ep.close()")
        finally:
            self.browser.close()
            self.pw.stop()
            self.server.shutdown()
