"""ONNX backend node conformance through the ASan + UBSan build of edgepack-run, side by side with wasm.

    python -m tests.conformance.runner_asan [--ops Relu,Conv] [--jobs 2] [--json results.json]

Each case is packaged once (web target, as runner.py does), then run on the same plan by the wasm SIMD
build under wasmtime and by edge/build/asan/edgepack-run natively (x86-64, -fsanitize=address,undefined,
-fno-sanitize-recover=all), one process per case, outputs compared with the case's expected outputs.
Statuses as in runner.py, plus `sanitizer` when the ASan/UBSan/LSan build reported anything (the report's
first lines are kept). Exit status 1 on any sanitizer report, asan fail/crash, or wasm/asan disagreement."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from multiprocessing import Pool
from pathlib import Path

import numpy as np

from packager.targets.edge import from_npy_carrier, npy_carrier

from .runner import CASE_TIMEOUT_S, beside_row, collect, report_beside, run_beside_wasm

REPO = Path(__file__).resolve().parents[2]
ASAN_CLI = REPO / "edge" / "build" / "asan" / "edgepack-run"
SAN_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "Sanitizer")


def build_cli() -> Path:
    subprocess.run(["make", "-s", "-C", str(REPO / "edge"), "build/asan/edgepack-run"], check=True, capture_output=True)
    return ASAN_CLI


def sanitizer_report(stderr: str) -> str | None:
    """The first lines of a sanitizer report in stderr, or None."""
    for m in SAN_MARKERS:
        i = stderr.find(m)
        if i >= 0:
            return stderr[max(0, stderr.rfind("\n", 0, i) + 1):][:1500]
    return None


def run_asan_cli(cli: Path, bundle: Path, feeds: dict[str, np.ndarray], outputs: list[dict],
                 timeout: float) -> tuple[str, str, dict[str, np.ndarray]]:
    """(status, why, outputs): status 'ok', 'sanitizer' or 'error' (edgepack-run refused or failed)."""
    with tempfile.TemporaryDirectory() as tmp:
        args = [str(cli), str(bundle)]
        for i, (name, v) in enumerate(feeds.items()):
            p = Path(tmp) / f"in{i}.npy"
            np.save(p, npy_carrier(np.array(v, order="C", copy=True)))
            args += ["--input", f"{name}={p}"]
        for i, o in enumerate(outputs):
            args += ["--output", f"{o['name']}={Path(tmp) / f'out{i}.npy'}"]
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=99",
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
        r = subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=timeout, env=env)
        rep = sanitizer_report(r.stderr)
        if rep or r.returncode == 99 or r.returncode < 0:
            return "sanitizer", rep or f"exit {r.returncode}: {r.stderr[-800:]}", {}
        if r.returncode != 0:
            return "error", f"exit {r.returncode}: {r.stderr.strip()[-300:]}", {}
        return "ok", "", {o["name"]: from_npy_carrier(np.load(Path(tmp) / f"out{i}.npy"), o["dtype"])
                          for i, o in enumerate(outputs)}


def run_case(case, workdir: Path, cli: Path) -> dict[str, tuple[str, str]]:
    """{'wasm': (status, why), 'asan': (status, why)} for one case."""

    def asan(out: Path, feeds: dict, b, wasm_status: str, judge) -> tuple[str, str]:
        status, why, got = run_asan_cli(cli, out, feeds, b.outputs, CASE_TIMEOUT_S)
        if status == "sanitizer":
            return "sanitizer", why
        if status == "error":
            # edgepack-run refusing what wasm refused (e.g. a data-dependent index error) is agreement
            return (wasm_status if wasm_status in ("fail", "rejected") else "fail"), why
        return judge(got)

    return run_beside_wasm(case, workdir, "asan", asan)


def _worker(args: tuple[list[str], str]) -> list[dict]:
    names, cli = args
    wanted = set(names)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for case, op in collect(None):
            if case.name not in wanted:
                continue
            t = time.perf_counter()
            out.append(beside_row(case, op, run_case(case, Path(tmp), Path(cli)), "asan", t))
    return out


def run_all(ops: set[str] | None, jobs: int = 1) -> list[dict]:
    cli = build_cli()
    names = [c.name for c, _ in collect(ops)]
    chunks = [(names[i::jobs], str(cli)) for i in range(jobs)]
    if jobs == 1:
        results = _worker(chunks[0])
    else:
        with Pool(jobs) as pool:
            results = [r for part in pool.map(_worker, chunks) for r in part]
    order = {n: i for i, n in enumerate(names)}
    return sorted(results, key=lambda r: order[r["case"]])


def table(results: list[dict]) -> str:
    tot = defaultdict(int)
    for r in results:
        tot["cases"] += 1
        for k in ("wasm", "asan"):
            tot[f"{k}_{r[k]}"] += 1
    keys = ["cases", "wasm_pass", "asan_pass", "asan_rejected", "asan_fail", "asan_crash", "asan_sanitizer"]
    return "  ".join(f"{k} {tot[k]}" for k in keys)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", help="comma-separated op types to run (default: all)")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="parallel worker processes")
    ap.add_argument("--json", help="write per-case results here")
    a = ap.parse_args(argv)
    results = run_all(set(a.ops.split(",")) if a.ops else None, a.jobs)
    print(table(results))
    return report_beside(results, "asan", ("fail", "crash", "sanitizer"), 300, a.json)


if __name__ == "__main__":
    sys.exit(main())
