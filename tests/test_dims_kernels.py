"""The plan v2 kernels (SHAPE, VIEW, RANGE, CONSTANT_OF_SHAPE), EXPAND's shape input and the shape functions of the
run-time parameter forms, in C: wasm_kernels/tests/test_dims.c builds nodes by hand and calls shape/check/run of the
host build (values, dims and every error path). Static plans never hold these kernels, so test_shape_fns cannot."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from packager.toolchain import ensure_host_lib

KERNELS = Path(__file__).resolve().parents[1] / "wasm_kernels"


@pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None, reason="no host C compiler")
def test_dims_kernels(tmp_path: Path) -> None:
    lib = ensure_host_lib("host")
    exe = tmp_path / "test_dims"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
                    "-I", str(KERNELS / "include"), "-I", str(KERNELS / "src"), str(KERNELS / "tests" / "test_dims.c"),
                    str(lib), f"-Wl,-rpath,{lib.parent}", "-o", str(exe)], check=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    print(r.stdout)
    assert r.returncode == 0, r.stdout[-4000:]
    assert " 0 failures" in r.stdout
