"""Short fuzz runs of what edgepack-run reads from a bundle and the NEON core (edge/fuzz/, docs/security.md):
libFuzzer + ASan + UBSan on the manifest (JSON) reader, the .npy reader and the SHA-256 / Ed25519 code, 20 s each
from the committed seeds; the aarch64 build of the plan harness (gcc ASan + UBSan, coverage-guided driver) under
qemu-aarch64 for 45 s after replaying the plan seeds. Any sanitizer report, crash, trap (a broken invariant of the
harness) or timeout fails. The 10-minute runs: make -C edge fuzz-cli fuzz-neon FUZZ_SECONDS=600."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import have_libfuzzer

REPO = Path(__file__).resolve().parent.parent
EDGE = REPO / "edge"


@pytest.mark.parametrize("harness,min_runs", [("json", 10_000), ("npy", 10_000), ("crypto", 100)])
def test_cli_parser_fuzz_20s(tmp_path: Path, harness: str, min_runs: int) -> None:
    if not have_libfuzzer(tmp_path):
        pytest.skip("clang-19 with libFuzzer (Debian: libclang-rt-19-dev) not installed")
    exe = EDGE / "build" / "fuzz" / f"fuzz_{harness}"
    subprocess.run(["make", "-s", "-C", str(EDGE), str(exe.relative_to(EDGE))], check=True, capture_output=True)
    (tmp_path / "corpus").mkdir()
    r = subprocess.run([str(exe), "-max_total_time=20", "-timeout=10", "-rss_limit_mb=2048", "-print_final_stats=1",
                        f"-artifact_prefix={tmp_path}/", str(tmp_path / "corpus"), str(EDGE / "fuzz" / "corpus" / harness)],
                       capture_output=True, text=True, errors="replace", timeout=300,
                       env={"UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1", "PATH": "/usr/bin:/bin"})
    log = r.stdout + r.stderr
    assert r.returncode == 0 and "Sanitizer" not in log and "deadly signal" not in log, log[-8000:]
    runs = int(re.search(r"stat::number_of_executed_units:\s*(\d+)", log).group(1))
    assert runs >= min_runs, log[-2000:]


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None or shutil.which("qemu-aarch64") is None,
                    reason="aarch64 cross compiler or qemu-user missing")
def test_neon_plan_fuzz_45s(tmp_path: Path) -> None:
    r = subprocess.run(["make", "-s", "-C", str(EDGE), "fuzz-neon", "FUZZ_SECONDS=45"],
                       capture_output=True, text=True, errors="replace", timeout=900)
    log = r.stdout + r.stderr
    assert r.returncode == 0 and "runtime error" not in log and "Sanitizer" not in log, log[-8000:]
    replayed, runs = re.search(r"replayed (\d+) inputs", log), re.search(r"runs: (\d+) corpus: \d+ blocks: \d+", log)
    assert replayed and runs, log[-4000:]
    replayed, runs = int(replayed.group(1)), int(runs.group(1))
    seeds = len(list((REPO / "wasm_kernels" / "fuzz" / "corpus").iterdir()))
    assert replayed >= seeds and runs > replayed + 1000, log[-2000:]
