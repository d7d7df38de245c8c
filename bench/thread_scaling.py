"""Thread scaling in headless Chromium (a benchmark, not a test): on one cross-origin isolated page, the bundle's
single-threaded build and its threaded build of the same ISA (relaxed SIMD where Chromium validates it), loaded
one session at a time and alternating round by round, so that no other thread pool spins while one is timed
(bench.browser_bench --threads alternates with onnxruntime-web, whose spinning workers take the cores).

    python3 -m bench.thread_scaling [--models resnet18] [--threads 2] [--rounds 6] [--runs 8] [--per-node 12]

Prints per model: median ms single-threaded, median ms threaded, and the speed-up (single / threaded).
--per-node K: then each node timed alone (ep_run_node, after a run, median of the rounds) in both sessions,
and the K nodes that lose most to an ideal split (threaded ms - single ms / threads): where scaling stops."""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.browser_bench import _prefix, _prepare  # noqa: E402
from bench.page_profile import kinds  # noqa: E402
from tests.browser_env import ISOLATED, chromium, chromium_missing, evaluate_fresh, serving  # noqa: E402

# Both pages start alike: the runtime imported, the inputs fetched as the runtime takes them.
SETUP = """  const ep = await import('/iso/edgepack/index.js');
  const ctors = { float32: Float32Array, int64: BigInt64Array };
  const feeds = {};
  for (const x of inputs) feeds[x.name] = { data: new ctors[x.dtype](await (await fetch(x.url)).arrayBuffer()), dims: x.dims };
"""

PAGE = """async ({ bundle, inputs, threads, rounds, runs }) => {
""" + SETUP + """  const times = { 1: [], [threads]: [] }, builds = {};
  for (let r = 0; r < rounds; r++) for (const n of (r % 2 ? [threads, 1] : [1, threads])) {
    const s = await ep.load(bundle, { backend: 'wasm', threads: n });
    for (let i = 0; i < 3; i++) await s.run(feeds);
    for (let i = 0; i < runs; i++) { const t0 = performance.now(); await s.run(feeds); times[n].push(performance.now() - t0); }
    builds[n] = `${s.variant}, ${s.features.threads} thread(s)`;
    s.destroy();
    await new Promise((res) => setTimeout(res, 50));   // let the workers go back to sleep
  }
  return { times, builds, isolated: globalThis.crossOriginIsolated };
}"""

# Each node alone (ep_run_node after a whole run, so its inputs are the real ones), per thread count.
PER_NODE = """async ({ bundle, inputs, threads, rounds }) => {
""" + SETUP + """  const med = (xs) => { const q = [...xs].sort((a, b) => a - b); return q[q.length >> 1]; };
  const out = {};
  for (const n of [1, threads]) {
    const s = await ep.load(bundle, { backend: 'wasm', threads: n });
    for (let i = 0; i < 3; i++) await s.run(feeds);
    const per = Array.from({ length: s.ex.ep_num_nodes() }, () => []);
    for (let r = 0; r < rounds; r++) {
      await s.run(feeds);
      per.forEach((t, k) => { const t0 = performance.now(); s.ex.ep_run_node(k); t.push(performance.now() - t0); });
    }
    out[n] = per.map(med);
    s.destroy();
    await new Promise((res) => setTimeout(res, 50));
  }
  return out;
}"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--runs", type=int, default=8, help="timed runs per session per round")
    ap.add_argument("--per-node", type=int, default=0, metavar="K", help="also time nodes alone; print the K worst")
    a = ap.parse_args()
    why = chromium_missing()
    if why:
        raise SystemExit(why)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "index.html").write_text("<!doctype html><meta charset=utf-8><title>edgepack threads</title>\n")
        with serving({"/": root, "/edgepack": REPO / "web" / "src"}) as url, chromium() as browser:
            print(f"{'model':<13}{'1 thread ms':>13}{f'{a.threads} threads ms':>15}{'speed-up':>10}  builds")
            for name in [n for n in a.models.split(",") if n]:
                m = _prefix(True, _prepare(root, name))   # the bundle and its inputs, as bench.browser_bench has them
                res = evaluate_fresh(browser, url + ISOLATED + "/index.html", PAGE,
                                     {"bundle": m["bundle"], "inputs": m["inputs"], "threads": a.threads,
                                      "rounds": a.rounds, "runs": a.runs})
                one, many = (statistics.median(res["times"][str(n)]) for n in (1, a.threads))
                print(f"{name:<13}{one:>13.2f}{many:>15.2f}{one / many:>10.2f}  {res['builds']['1']} / {res['builds'][str(a.threads)]}")
                if a.per_node:
                    per = evaluate_fresh(browser, url + ISOLATED + "/index.html", PER_NODE,
                                         {"bundle": m["bundle"], "inputs": m["inputs"], "threads": a.threads,
                                          "rounds": max(a.rounds, 9)})
                    one_n, many_n = per["1"], per[str(a.threads)]
                    kind = kinds(root / "bundles" / name)
                    loss = sorted(range(len(one_n)), key=lambda k: one_n[k] / a.threads - many_n[k])[:a.per_node]
                    print(f"  {'node':>5} {'kind':<16}{'1 thread':>10}{f'{a.threads} threads':>11}{'speed-up':>10}{'lost ms':>9}")
                    for k in loss:
                        print(f"  {k:>5} {kind[k]:<16}{one_n[k]:>10.3f}{many_n[k]:>11.3f}{one_n[k] / max(many_n[k], 1e-3):>10.2f}"
                              f"{many_n[k] - one_n[k] / a.threads:>9.3f}")


if __name__ == "__main__":
    main()
