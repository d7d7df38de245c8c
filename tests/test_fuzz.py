"""60 seconds of coverage-guided fuzzing of the plan reader + executor (libFuzzer + ASan + UBSan,
wasm_kernels/fuzz/fuzz_plan.c) from the committed seed corpus: any crash, sanitizer report, leak or
timeout (10 s per plan: a real hang, the harness caps the arena) fails the test. The 10-minute run is
`make -C wasm_kernels fuzz-long`."""
from __future__ import annotations

import base64
import subprocess
import zlib
from pathlib import Path

import pytest

from .conftest import have_libfuzzer

REPO = Path(__file__).resolve().parent.parent
KERNELS = REPO / "wasm_kernels"


def test_seed_corpus_is_small_and_covers_every_kernel() -> None:
    import struct
    from packager.plan.opspec import NO_KERNEL, Op
    seeds = sorted((KERNELS / "fuzz" / "corpus").glob("*.plan"))
    assert seeds and sum(p.stat().st_size for p in seeds) < 1 << 20
    ops = set()
    for p in seeds:
        b = p.read_bytes()
        n, off = struct.unpack_from("<I", b, 20)[0], struct.unpack_from("<I", b, 36)[0]
        ops |= {struct.unpack_from("<H", b, off + 32 * i)[0] for i in range(n)}
    kernels = set(Op) - NO_KERNEL   # ids reserved without a kernel have nothing to fuzz yet
    assert ops >= {op.value for op in kernels}, sorted({op.name for op in kernels if op.value not in ops})


def test_fuzz_plan_60s(tmp_path: Path) -> None:
    if not have_libfuzzer(tmp_path):
        pytest.skip("clang-19 with libFuzzer (Debian: libclang-rt-19-dev) not installed")
    before = set((KERNELS / "build" / "fuzz").glob("*-*"))
    r = subprocess.run(["make", "-s", "-C", str(KERNELS), "fuzz", "FUZZ_SECONDS=60", f"FUZZ_CORPUS={tmp_path / 'corpus'}"],
                       capture_output=True, text=True, errors="replace", timeout=600)
    log = r.stdout + r.stderr
    for f in sorted(set((KERNELS / "build" / "fuzz").glob("*-*")) - before):   # crash-/timeout-/leak- inputs
        # the failing plan, reproducible from a CI log: base64 -d | zlib-inflate > x.plan; ./build/fuzz/fuzz_plan x.plan
        log += f"\n{f.name} (zlib, base64): {base64.b64encode(zlib.compress(f.read_bytes(), 9)).decode()}\n"
    stats = {line.split(":")[2].strip(): line.split(":")[-1].strip() for line in log.splitlines() if line.startswith("stat::")}
    assert r.returncode == 0, log[-12000:]
    assert "Sanitizer" not in log and "ERROR: libFuzzer" not in log, log[-12000:]
    assert int(stats.get("number_of_executed_units", 0)) > 10000, stats
