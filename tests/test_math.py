"""ep_math accuracy against the host libm: builds wasm_kernels/tests/test_math.c with the host C compiler
and runs it (it sweeps the float range with a stride, the branch points and the IEEE special cases)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[1] / "wasm_kernels"


@pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None, reason="no host C compiler")
def test_math_against_libm(tmp_path: Path) -> None:
    exe = tmp_path / "test_math"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(KERNELS / "include"),
                    "-I", str(KERNELS / "src"), str(KERNELS / "tests" / "test_math.c"),
                    str(KERNELS / "src" / "ep_math.c"), "-lm", "-o", str(exe)], check=True)
    r = subprocess.run([str(exe), "1021"], capture_output=True, text=True, timeout=600)
    print(r.stdout)
    assert r.returncode == 0, r.stdout[-4000:]
