"""Which nodes of a bundle run on one thread only, their share of the single-threaded run time, and the speed-up
bound that share implies (Amdahl: 1 / (serial + parallel / threads)): what holds a threaded run back, measured
without needing idle cores (the wall-clock 2-thread figure needs them; this one does not).

    python3 -m bench.serial_profile BUNDLE [BUNDLE ...] [--threads 2] [--rounds 9] [--top 5]

Per bundle (bench/serial_profile.mjs in Node): every node's median time alone in the single-threaded SIMD build, and
whether it hands tasks to the thread pool in the threaded build (deterministic: the pool's task counters). Prints the
serial share, the bound, and the kernel kinds holding the most serial time. bench/zoo.py --threads N prints the same
per zoo model."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.page_profile import kinds  # noqa: E402


def amdahl(serial_share: float, threads: int) -> float:
    return 1.0 / (serial_share + (1.0 - serial_share) / threads)


def serial_profile(bundle: Path, threads: int = 2, rounds: int = 9) -> dict:
    """{'serial_share', 'bound', 'serial_kinds': {kind: share of the 1-thread time}, 'total_ms', 'nodes': [...]}"""
    r = subprocess.run(["node", str(REPO / "bench" / "serial_profile.mjs"), str(bundle.resolve()), "--threads", str(threads),
                        "--rounds", str(rounds)], capture_output=True, text=True, cwd=REPO / "bench", timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"serial_profile.mjs failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    res = json.loads(r.stdout)
    kind = kinds(bundle)
    total = sum(res["ms"]) or 1e-9
    serial: dict[str, float] = {}
    for k, ms, tasks in zip(kind, res["ms"], res["tasks"]):
        if tasks == 0:
            serial[k] = serial.get(k, 0.0) + ms / total
    share = sum(serial.values())
    return {"threads": threads, "total_ms": total, "serial_share": share, "bound": amdahl(share, threads),
            "serial_kinds": dict(sorted(serial.items(), key=lambda kv: -kv[1])),
            "nodes": [{"kind": k, "ms": ms, "tasks": t} for k, ms, t in zip(kind, res["ms"], res["tasks"])]}


def summary(p: dict, top: int = 4) -> str:
    kinds_ = ", ".join(f"{k} {v:.0%}" for k, v in list(p["serial_kinds"].items())[:top])
    return f"serial {p['serial_share']:.0%} -> bound {p['bound']:.2f}x at {p['threads']} threads ({kinds_})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundles", nargs="+", type=Path)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--top", type=int, default=5)
    a = ap.parse_args()
    for b in a.bundles:
        p = serial_profile(b, a.threads, a.rounds)
        print(f"{b.name}: {p['total_ms']:.1f} ms at 1 thread, {summary(p, a.top)}")


if __name__ == "__main__":
    main()
