"""Where the runtime binaries come from: wasm_kernels/ builds them with make (clang-19 + wasm-ld, emscripten)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .errors import PackagerError

REPO = Path(__file__).resolve().parent.parent
KERNELS = REPO / "wasm_kernels"
BUILD = KERNELS / "build"
WEB_RUNTIME = {"edgepack.wasm": BUILD / "edgepack.wasm", "edgepack-scalar.wasm": BUILD / "edgepack-scalar.wasm",
               "edgepack-relaxed.wasm": BUILD / "edgepack-relaxed.wasm", "edgepack-threads.wasm": BUILD / "edgepack-threads.wasm",
               "edgepack-threads-relaxed.wasm": BUILD / "edgepack-threads-relaxed.wasm"}


def ensure_wasm() -> dict[str, Path]:
    """Build (or bring up to date) the wasm runtimes and return {bundle file name: path}."""
    if shutil.which("clang-19") is None or shutil.which("emcc") is None:
        if all(p.exists() for p in WEB_RUNTIME.values()):
            return WEB_RUNTIME
        raise PackagerError("clang-19/lld-19 or emscripten (emcc) is not installed: run scripts/setup.sh")
    r = subprocess.run(["make", "-s", "-C", str(KERNELS), "-j2", *[str(p.relative_to(KERNELS)) for p in WEB_RUNTIME.values()]],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise PackagerError(f"building the wasm runtime failed:\n{r.stdout[-2000:]}{r.stderr[-4000:]}")
    return WEB_RUNTIME


def ensure_host_lib(kind: str = "host") -> Path:
    """The core built for this machine (kind 'host' or 'asan'), for tests and sanitizer runs."""
    target = BUILD / kind / "libedgepack.so"
    r = subprocess.run(["make", "-s", "-C", str(KERNELS), str(target.relative_to(KERNELS))], capture_output=True, text=True)
    if r.returncode != 0:
        raise PackagerError(f"building the host runtime failed:\n{r.stderr[-4000:]}")
    return target
