"""What the browser tests, the demo and the browser benchmarks share: a local static HTTP server (right MIME
types, application/wasm included; COOP/COEP headers under /iso/ so pages there are cross-origin isolated and
can use SharedArrayBuffer), headless Debian Chromium driven by Playwright (never `playwright install`), and one
script evaluated on a fresh page (the benchmarks' passes)."""
from __future__ import annotations

import functools
import http.server
import mimetypes
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run",
                 "--disable-sync", "--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"]
ISOLATED = "/iso"   # path prefix served with COOP/COEP (crossOriginIsolated pages)
TYPES = {".wasm": "application/wasm", ".js": "text/javascript", ".mjs": "text/javascript", ".json": "application/json",
         ".html": "text/html; charset=utf-8", ".css": "text/css", ".onnx": "application/octet-stream",
         ".plan": "application/octet-stream", ".bin": "application/octet-stream", ".map": "application/json",
         ".ts": "text/plain", ".png": "image/png", ".svg": "image/svg+xml"}


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves mounts {url prefix: directory}; a request under /iso/... is the same file with COOP/COEP headers."""
    mounts: dict[str, Path] = {}
    extensions_map = {**mimetypes.types_map, **TYPES}

    def __init__(self, *a, mounts: dict[str, Path], isolate_all: bool = False, **kw) -> None:
        self.mounts = mounts
        self.isolate_all = isolate_all
        super().__init__(*a, **kw)

    def _under_iso(self) -> bool:
        return self.path == ISOLATED or self.path.startswith(ISOLATED + "/")

    def _isolated(self) -> bool:
        return self.isolate_all or self._under_iso()

    def translate_path(self, path: str) -> str:
        path = path.split("?", 1)[0].split("#", 1)[0]
        if self._under_iso():
            path = path[len(ISOLATED):] or "/"
        for prefix in sorted(self.mounts, key=len, reverse=True):
            p = prefix.rstrip("/")
            if path == p or path.startswith(p + "/"):
                root = self.mounts[prefix].resolve()
                target = (root / path[len(p):].lstrip("/")).resolve()
                return str(target) if target == root or root in target.parents else str(root / "__outside__")
        return str(Path("/nonexistent"))

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        if self._isolated():
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
            self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        super().end_headers()

    def log_message(self, *a) -> None:
        pass


def make_server(mounts: dict[str, Path], host: str = "127.0.0.1", port: int = 0,
                isolate_all: bool = False) -> http.server.ThreadingHTTPServer:
    """A static server over `mounts` ({'/': dir, '/edgepack': dir, ...}); call serve_forever() (in a thread).
    isolate_all: COOP/COEP on every response, not only under /iso/."""
    handler = functools.partial(_Handler, mounts={k: Path(v) for k, v in mounts.items()}, isolate_all=isolate_all)
    return http.server.ThreadingHTTPServer((host, port), handler)


@contextmanager
def serving(mounts: dict[str, Path], isolate_all: bool = False) -> Iterator[str]:
    """Serves mounts in a background thread; yields the base URL (http://127.0.0.1:PORT)."""
    srv = make_server(mounts, isolate_all=isolate_all)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def chromium_missing() -> str | None:
    """Why the browser cannot run here (None when it can)."""
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        return "Debian chromium is not installed (scripts/setup.sh installs it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright (python) is not installed (pip install playwright)"
    return None


@contextmanager
def chromium(extra_args: tuple[str, ...] = ()) -> Iterator[object]:
    """A headless Chromium (Playwright Browser) with WebGPU on SwiftShader enabled (and `extra_args`)."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[*CHROMIUM_ARGS, *extra_args])
        try:
            yield browser
        finally:
            browser.close()


def evaluate_fresh(opener, url: str, script: str, arg: object = None) -> object:
    """page.evaluate(script, arg) on a new page of `opener` (a Browser or a BrowserContext) at url, then the page
    closed: each benchmark pass starts without what an earlier one left (sessions, worker pools, caches)."""
    page = opener.new_page()
    try:   # closed on failure too: a page left open keeps its sessions' worker pools spinning
        page.goto(url)
        return page.evaluate(script, arg)
    finally:
        page.close()
