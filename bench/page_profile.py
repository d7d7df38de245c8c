"""The same edgepack builds on one bundle in Chromium (a cross-origin isolated page: 5 us timers) and in Node,
by bench/profile_core.mjs: wall ms per run (runSync, and ep_run alone), and per-node ms summed by kernel kind.
Shows whether an engine's slowdown is in the kernels' code generation or in the JS around them.

    python3 -m bench.page_profile BUNDLE A.wasm [B.wasm ...] [--seconds 3] [--rounds 10] [--no-node] [--no-browser]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from packager.plan.layout import decode  # noqa: E402
from packager.plan.opcodes import Op  # noqa: E402
from tests.browser_env import ISOLATED, chromium, evaluate_fresh, serving  # noqa: E402

PAGE = """async ({ prefix, files, seconds, rounds }) => {
  const { Session } = await import(prefix + '/edgepack/index.js');
  const { profile, seededFeeds } = await import(prefix + '/bench/profile_core.mjs');
  const manifest = await (await fetch(prefix + '/b/manifest.json')).json();
  const plan = new Uint8Array(await (await fetch(prefix + '/b/model.plan')).arrayBuffer());
  const wasms = [];
  for (const f of files) wasms.push({ name: f, bytes: await (await fetch(prefix + '/w/' + f)).arrayBuffer() });
  return profile({ Session, plan, manifest, wasms, seconds, rounds, feeds: seededFeeds(manifest) });
}"""


def kinds(bundle: Path) -> list[str]:
    names = {int(o): o.name for o in Op}
    plan = decode((bundle / "model.plan").read_bytes())
    return [names.get(n.op, str(n.op)) for n in plan.nodes]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=Path)
    ap.add_argument("wasms", nargs="+", type=Path)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--no-node", action="store_true")
    ap.add_argument("--no-browser", action="store_true")
    a = ap.parse_args()
    kind = kinds(a.bundle)
    results = {}
    if not a.no_browser:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "index.html").write_text("<!doctype html><meta charset=utf-8><title>profile</title>\n")
            (root / "w").mkdir()
            files = []
            for i, w in enumerate(a.wasms):
                f = f"{i}-{w.name}"
                shutil.copy(w, root / "w" / f)
                files.append(f)
            mounts = {"/": root, "/edgepack": REPO / "web" / "src", "/bench": REPO / "bench", "/b": a.bundle}
            with serving(mounts) as url, chromium() as browser:
                results["chromium"] = evaluate_fresh(browser, url + ISOLATED + "/index.html", PAGE,
                                                     {"prefix": ISOLATED, "files": files, "seconds": a.seconds, "rounds": a.rounds})
    if not a.no_node:
        out = subprocess.run(["node", "--experimental-wasm-relaxed-simd", str(REPO / "bench" / "profile_node.mjs"), str(a.bundle),
                              str(a.seconds), str(a.rounds), *map(str, a.wasms)], check=True, capture_output=True, text=True).stdout
        results["node"] = json.loads(out)
    cols = [(eng, i) for eng in results for i in range(len(a.wasms))]
    hdr = "".join(f"{eng[:6]}:{a.wasms[i].name[:14]:>14} " for eng, i in cols)
    print(f"{'':<16}{hdr}")
    for key in ("run_ms", "ep_run_ms"):
        print(f"{key:<16}" + "".join(f"{results[eng][i][key]:>22.2f} " for eng, i in cols))
    for field, what in (("nodes_ms", "in a pass"), ("warm_ms", "warm, repeated")):
        by = {c: defaultdict(float) for c in cols}
        for eng, i in cols:
            for k, t in zip(kind, results[eng][i][field]):
                by[(eng, i)][k] += t
        order = sorted(by[cols[0]], key=lambda k: -by[cols[0]][k])
        print(f"per node {what}:")
        print(f"{'  sum of nodes':<16}" + "".join(f"{sum(by[c].values()):>22.2f} " for c in cols))
        for k in order:
            print(f"  {k:<14}" + "".join(f"{by[c][k]:>22.2f} " for c in cols))
    if len(cols) > 1:
        print("\ntop nodes (first column's order):")
        first = results[cols[0][0]][cols[0][1]]["nodes_ms"]
        for n in sorted(range(len(first)), key=lambda n: -first[n])[:12]:
            print(f"{n:>4} {kind[n]:<12}" + "".join(f"{results[eng][i]['nodes_ms'][n]:>10.3f}" for eng, i in cols))


if __name__ == "__main__":
    main()
