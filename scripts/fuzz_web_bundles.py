"""The JS runtime's property test for a given time: mutated manifest.json fields and model.plan bytes, loaded and run
by web/src/runtime.js in Node, each a clean EdgepackError or the unmutated answer, never a crash, another error or a
hang (tests/test_web_api.py, MUTATE: CI runs 300 cases of each kind). Batches of cases with fresh seeds on a static
and a version-2 bundle until the time is up; docs/security.md records a 10-minute run.

    python3 scripts/fuzz_web_bundles.py --seconds 600
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.test_web_api import MUTATE, RUNTIME, _two_in_dyn_model, _two_in_model, cli_package  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600, help="how long to run (default 600)")
    ap.add_argument("--batch", type=int, default=400, help="cases per Node process (default 400)")
    ap.add_argument("--seed", type=int, default=1, help="first seed (default 1)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        bundles = {"static": cli_package(_two_in_model(), tmp / "two_in"),
                   "dynamic": cli_package(_two_in_dyn_model(), tmp / "two_in_dyn", "--dynamic")}
        (tmp / "mutate.mjs").write_text(MUTATE)
        totals = {f"{b}/{w}": {"ran": 0, "refused": 0} for b in bundles for w in ("manifest", "plan")}
        bad: list[dict] = []
        seed, t0 = a.seed, time.monotonic()
        while time.monotonic() - t0 < a.seconds:
            for name, path in bundles.items():
                for what in ("manifest", "plan"):
                    r = subprocess.run(["node", str(tmp / "mutate.mjs"), RUNTIME.as_uri(), str(path), str(a.batch),
                                        str(seed), what], capture_output=True, text=True, timeout=1800, cwd=tmp)
                    if r.returncode != 0:   # a crash of the Node process itself
                        bad.append({"bundle": name, "what": what, "seed": seed, "why": r.stderr[-500:]})
                    else:
                        res = json.loads(r.stdout.strip().splitlines()[-1])
                        for k in ("ran", "refused"):
                            totals[f"{name}/{what}"][k] += res["counts"][k]
                        bad += [dict(x, bundle=name, seed=seed) for x in res["bad"]]
                    seed += 1
        cases = sum(v["ran"] + v["refused"] for v in totals.values())
        print(json.dumps({"seconds": round(time.monotonic() - t0), "cases": cases, "seeds": [a.seed, seed - 1],
                          "totals": totals, "bad": bad[:20], "nbad": len(bad)}, indent=1))
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
