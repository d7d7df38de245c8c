#!/usr/bin/env python3
"""Serve a directory (the web demo: demo/out) over HTTP on localhost with what edgepack pages need:
application/wasm for .wasm, no caching, and COOP/COEP headers so the page is cross-origin isolated
(SharedArrayBuffer: threads for edgepack and onnxruntime-web). Ctrl-C stops it.

    python3 scripts/serve.py demo/out [--port 8000] [--host 127.0.0.1] [--no-isolation]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.browser_env import make_server  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path, nargs="?", default=REPO / "demo" / "out")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--host", default="127.0.0.1", help="127.0.0.1 (default) keeps it local; WebCrypto needs localhost or https")
    ap.add_argument("--no-isolation", action="store_true", help="no COOP/COEP headers (the page then runs single-threaded)")
    a = ap.parse_args()
    if not (a.root / "index.html").exists():
        sys.exit(f"{a.root}/index.html not found: build the demo first (python3 demo/build.py)")
    srv = make_server({"/": a.root}, a.host, a.port, isolate_all=not a.no_isolation)
    print(f"serving {a.root} on http://{a.host}:{srv.server_address[1]}/  (Ctrl-C to stop)", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()


if __name__ == "__main__":
    main()
