"""What a web page downloads: the web runtime's JS minified by esbuild (one ESM file from web/src/index.js; the
optional WebGPU/threads parts, loaded lazily, measured apart when present) and each wasm build, raw and gzipped,
next to onnxruntime-web's wasm-only build. Targets: runtime JS <= 60 KB minified, each wasm <= 200 KB.

    python3 -m bench.browser_sizes [--json bench/results/sizes.json]
"""
from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "web" / "src"
ESBUILD = REPO / "web" / "node_modules" / ".bin" / "esbuild"
WASM = REPO / "wasm_kernels" / "build"
ORT = REPO / "bench" / "node_modules" / "onnxruntime-web" / "dist"
JS_TARGET, WASM_TARGET = 60_000, 200_000
OPTIONAL = {"webgpu": "webgpu/index.js", "threads": "threads.js"}


def minified(entry: Path, external: list[str]) -> bytes:
    """entry bundled and minified by esbuild into one ESM file; `external` imports left out."""
    if not ESBUILD.exists():
        raise SystemExit("esbuild missing: run scripts/setup.sh (npm ci in web/)")
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "out.js"
        cmd = [str(ESBUILD), str(entry), "--bundle", "--minify", "--format=esm", "--platform=neutral",
               "--external:node:*", f"--outfile={out}", "--log-level=warning", *[f"--external:{e}" for e in external]]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"esbuild failed:\n{r.stderr}")
        return out.read_bytes()


def sizes() -> list[dict]:
    rows = []
    # The core runtime without its lazily imported parts (what every page pays), then each part on its own.
    core = minified(SRC / "index.js", [f"./{p}" for p in OPTIONAL.values()])
    rows.append({"what": "edgepack runtime JS (minified, core)", "bytes": len(core), "gzip": len(gzip.compress(core, 9)), "target": JS_TARGET})
    for name, rel in OPTIONAL.items():
        if (SRC / rel).exists():
            b = minified(SRC / rel, [])
            rows.append({"what": f"edgepack {name} part JS (minified, lazy)", "bytes": len(b), "gzip": len(gzip.compress(b, 9))})
        else:
            rows.append({"what": f"edgepack {name} part JS", "missing": f"web/src/{rel} not in this build"})
    for w in sorted(WASM.glob("*.wasm")):
        b = w.read_bytes()
        rows.append({"what": w.name, "bytes": len(b), "gzip": len(gzip.compress(b, 9)), "target": WASM_TARGET})
    for f in ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm"):
        if (ORT / f).exists():
            b = (ORT / f).read_bytes()
            rows.append({"what": f"onnxruntime-web {f}", "bytes": len(b), "gzip": len(gzip.compress(b, 9))})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    rows = sizes()
    print(f"{'file':<48}{'bytes':>12}{'gzip':>10}  target")
    for r in rows:
        if "missing" in r:
            print(f"{r['what']:<48}{'-':>12}{'-':>10}  ({r['missing']})")
            continue
        t = r.get("target")
        verdict = "" if t is None else f"<= {t // 1000} KB: {'ok' if r['bytes'] <= t else 'OVER'}"
        print(f"{r['what']:<48}{r['bytes']:>12,}{r['gzip']:>10,}  {verdict}")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(rows, indent=1))
    if any(r.get("target") and r["bytes"] > r["target"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
