"""Thread scaling in headless Chromium (a benchmark, not a test): on one cross-origin isolated page, the bundle's
single-threaded build and its threaded build of the same ISA (relaxed SIMD where Chromium validates it), loaded
one session at a time and alternating round by round, so that no other thread pool spins while one is timed
(bench.browser_bench --threads alternates with onnxruntime-web, whose spinning workers take the cores).

    python3 -m bench.thread_scaling [--models resnet18] [--threads 2] [--rounds 6] [--runs 8]

Prints per model: median ms single-threaded, median ms threaded, and the speed-up (single / threaded)."""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.browser_bench import _prefix, _prepare  # noqa: E402
from tests.browser_env import ISOLATED, chromium, chromium_missing, serving  # noqa: E402

PAGE = """async ({ bundle, inputs, threads, rounds, runs }) => {
  const ep = await import('/iso/edgepack/index.js');
  const ctors = { float32: Float32Array, int64: BigInt64Array };
  const feeds = {};
  for (const x of inputs) feeds[x.name] = { data: new ctors[x.dtype](await (await fetch(x.url)).arrayBuffer()), dims: x.dims };
  const times = { 1: [], [threads]: [] }, builds = {};
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--runs", type=int, default=8, help="timed runs per session per round")
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
                page = browser.new_page()
                page.goto(url + ISOLATED + "/index.html")
                res = page.evaluate(PAGE, {"bundle": m["bundle"], "inputs": m["inputs"], "threads": a.threads,
                                           "rounds": a.rounds, "runs": a.runs})
                page.close()
                one, many = (statistics.median(res["times"][str(n)]) for n in (1, a.threads))
                print(f"{name:<13}{one:>13.2f}{many:>15.2f}{one / many:>10.2f}  {res['builds']['1']} / {res['builds'][str(a.threads)]}")


if __name__ == "__main__":
    main()
