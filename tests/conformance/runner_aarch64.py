"""ONNX backend node conformance on the aarch64 (NEON) build, side by side with wasm.

    python -m tests.conformance.runner_aarch64 [--ops Relu,Conv] [--json results.json] [--cpu cortex-a76]
                                               [--mode bound|runtime]

Each case is packaged once (as runner.py does, in either of its modes), then run twice on the same plan: by the wasm SIMD
build under wasmtime, and by the Pi 5 static CLI (edge/build/pi5/edgepack-run, -mcpu=cortex-a76)
under qemu-aarch64, one process per case (a web bundle holds everything edgepack-run reads:
manifest.json and model.plan). Statuses as in runner.py, per runtime; the table puts the pass
counts next to each other and lists every case where the two runtimes disagree.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path


from .runner import CASE_TIMEOUT_S, MODES, beside_row, collect, refusal, report_beside, run_beside_wasm


def run_case(case, workdir: Path, cli: Path, qemu: list[str], mode: str = "bound") -> dict[str, tuple[str, str]]:
    """{'wasm': (status, why), 'aarch64': (status, why)} for one case."""
    from packager.errors import PackagerError
    from packager.targets.edge import run_cli

    def aarch64(out: Path, feeds: dict, b, wasm_status: str, judge) -> tuple[str, str]:
        try:
            return judge(run_cli(out, feeds, b.outputs, cli=cli, qemu=qemu, timeout=CASE_TIMEOUT_S))
        except PackagerError as e:
            return refusal(e)

    return run_beside_wasm(case, workdir, "aarch64", aarch64, mode)


def run_all(ops: set[str] | None, cpu: str, progress: bool = False, mode: str = "bound") -> list[dict]:
    from packager.targets.edge import EBUILD, QEMU_SYSROOT, ensure_edge
    cli = ensure_edge("pi5")["edgepack-run"]
    assert cli == EBUILD / "pi5" / "edgepack-run"
    qemu = ["qemu-aarch64", "-cpu", cpu, "-L", QEMU_SYSROOT]
    results = []
    cases = collect(ops)
    with tempfile.TemporaryDirectory() as tmp:
        for i, (case, op) in enumerate(cases):
            t = time.perf_counter()
            results.append(beside_row(case, op, run_case(case, Path(tmp), cli, qemu, mode), "aarch64", t))
            if progress and i % 100 == 0:
                print(f"  {i}/{len(cases)}", file=sys.stderr)
    return results


def table(results: list[dict]) -> str:
    per = defaultdict(lambda: defaultdict(int))
    for r in results:
        for k in ("wasm", "aarch64"):
            per[r["op"]][f"{k}_{r[k]}"] += 1
        per[r["op"]]["cases"] += 1
    cols = ["wasm_pass", "aarch64_pass", "aarch64_rejected", "aarch64_fail", "aarch64_crash"]
    rows = [f"{'op':<28}{'cases':>6}{'wasm':>7}{'a64':>7}{'rej':>6}{'fail':>6}{'crash':>6}"]
    tot = defaultdict(int)
    for op in sorted(per):
        c = per[op]
        for k in ["cases", *cols]:
            tot[k] += c[k]
        if c["wasm_pass"] or c["aarch64_pass"] or c["aarch64_fail"] or c["aarch64_crash"]:
            rows.append(f"{op:<28}{c['cases']:>6}" + "".join(f"{c[k]:>7}" if i < 2 else f"{c[k]:>6}" for i, k in enumerate(cols)))
    rows.append(f"{'total':<28}{tot['cases']:>6}" + "".join(f"{tot[k]:>7}" if i < 2 else f"{tot[k]:>6}" for i, k in enumerate(cols)))
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", help="comma-separated op types to run (default: all)")
    ap.add_argument("--cpu", default="cortex-a76", help="qemu-aarch64 CPU model (default cortex-a76, the Pi 5's core)")
    ap.add_argument("--json", help="write per-case results here")
    ap.add_argument("--mode", default="bound", choices=MODES, help="as in runner.py (runtime: every input fed at run time)")
    a = ap.parse_args(argv)
    ops = set(a.ops.split(",")) if a.ops else None
    results = run_all(ops, a.cpu, progress=True, mode=a.mode)
    print(table(results))
    return report_beside(results, "aarch64", ("fail", "crash"), 120, a.json)


if __name__ == "__main__":
    sys.exit(main())
