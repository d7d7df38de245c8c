"""The relaxed build's two int8 dot forms on whole bundles, in headless Chromium or Node (a benchmark, not a test):
per bundle, two sessions of the same bundle and .wasm in one page / process, one with int8Dot 'pair' and one with
'fused' (web/src/int8_dot_choice.js), their outputs checked to be the same bytes, a warm-up by time (alternating),
then single runs alternating A B B A ...; the ratio fused / pair is the median of the per-round ratios of medians.
Also prints what 'auto' picks on that engine.

    python3 -m bench.int8_dot_ab BUNDLE [BUNDLE ...] [--wasm build/edgepack-relaxed.wasm] [--node] [--seconds 2]
        [--rounds 6] [--slice 0.5]

--wasm: the relaxed build to run (default wasm_kernels/build's), in place of the bundle's own (loaded unverified).
--node: Node (--experimental-wasm-relaxed-simd) instead of Chromium; there the fused form is refused while Node 20's
baseline compiler computes it wrong (docs/int8.md), so both sessions run 'pair' and the ratio is ~1.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from packager.reference import random_inputs  # noqa: E402
from tests.browser_env import chromium, chromium_missing, serving  # noqa: E402

# In the page (or Node): both forms on one bundle, same bytes, warm-up, interleaved rounds.
AB = """async ({ index, bundle, inputs, seconds, rounds, slice }) => {
  const ep = await import(index);
  const ctors = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array };
  const feeds = {};
  for (const x of inputs) feeds[x.name] = { data: x.dtype === 'int64' ? BigInt64Array.from(x.data, BigInt) : new ctors[x.dtype](x.data), dims: x.dims };
  const auto = await ep.load(bundle, { threads: 1, variant: 'relaxed', verify: false });
  const picked = auto.features.int8Dot;
  const probe = (await import(index.replace(/index\.js$/, 'int8_dot_choice.js'))).measureInt8Dot(auto.ex);
  auto.destroy();
  const s = {};
  for (const form of ['pair', 'fused']) s[form] = await ep.load(bundle, { threads: 1, variant: 'relaxed', verify: false, int8Dot: form });
  const a = await s.pair.run(feeds), b = await s.fused.run(feeds);
  let same = true;
  for (const k of Object.keys(a)) for (let i = 0; i < a[k].data.length; i++) same &&= Object.is(a[k].data[i], b[k].data[i]);
  const runners = [['pair', () => s.pair.run(feeds)], ['fused', () => s.fused.run(feeds)]];
  for (const end = performance.now() + seconds * 1000; performance.now() < end;) for (const [, f] of runners) await f();
  const out = [];
  for (let r = 0; r < rounds; r++) {
    const round = { pair: [], fused: [] };
    const stop = performance.now() + 2 * slice * 1000;
    for (let i = 0; performance.now() < stop || i < 2; i++)
      for (const [k, f] of i % 2 ? [...runners].reverse() : runners) { const t0 = performance.now(); await f(); round[k].push(performance.now() - t0); }
    out.push(round);
  }
  const res = { picked, probe, forms: { pair: s.pair.features.int8Dot, fused: s.fused.features.int8Dot }, notes: s.fused.notes, same, rounds: out };
  s.pair.destroy(); s.fused.destroy();
  return res;
}"""


def _stage(bundle: Path, wasm: Path, root: Path) -> Path:
    """A copy of the bundle's files (the test server serves no symlinks) with `wasm` as its edgepack-relaxed.wasm."""
    d = root / bundle.name
    d.mkdir()
    for f in bundle.iterdir():
        if f.is_file() and f.name != "edgepack-relaxed.wasm":
            shutil.copy(f, d / f.name)
    shutil.copy(wasm, d / "edgepack-relaxed.wasm")
    return d


def _inputs(bundle: Path) -> list[dict]:
    manifest = json.loads((bundle / "manifest.json").read_text())
    return [{"name": k, "dtype": a.dtype.name, "dims": list(a.shape), "data": np.ascontiguousarray(a).ravel().tolist()}
            for k, a in random_inputs(manifest["inputs"], seed=1).items()]


def _summary(res: dict) -> str:
    ratios = [statistics.median(r["fused"]) / statistics.median(r["pair"]) for r in res["rounds"]]
    pair = statistics.median(t for r in res["rounds"] for t in r["pair"])
    fused = statistics.median(t for r in res["rounds"] for t in r["fused"])
    return (f"pair {pair:.2f} ms, fused {fused:.2f} ms, fused/pair {statistics.median(ratios):.3f} "
            f"(rounds {min(ratios):.3f}-{max(ratios):.3f}); runs {res['forms']}, auto picks {res['picked']}, "
            f"same bytes {res['same']}; probe (ms pair, fused) {[round(t, 3) for t in res['probe']['ms']]}" + (f"; notes {res['notes']}" if res["notes"] else ""))


def _node(arg: dict) -> dict:
    script = f"const f = {AB};\nconsole.log(JSON.stringify(await f({json.dumps(arg)})));\n"
    with tempfile.NamedTemporaryFile("w", suffix=".mjs", delete=False) as t:
        t.write(script)
    try:
        r = subprocess.run(["node", "--experimental-wasm-relaxed-simd", t.name], capture_output=True, text=True, check=True)
    finally:
        Path(t.name).unlink()
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundles", nargs="+", type=Path)
    ap.add_argument("--wasm", type=Path, default=REPO / "wasm_kernels" / "build" / "edgepack-relaxed.wasm")
    ap.add_argument("--node", action="store_true")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--slice", type=float, default=0.5)
    a = ap.parse_args(argv)
    if not a.node and chromium_missing():
        raise SystemExit(f"error: {chromium_missing()}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        staged = [_stage(b.resolve(), a.wasm.resolve(), root) for b in a.bundles]
        args = [{"bundle": str(d) if a.node else f"/b/{d.name}/", "inputs": _inputs(d), "seconds": a.seconds,
                 "rounds": a.rounds, "slice": a.slice,
                 "index": (REPO / "web" / "src" / "index.js").as_uri() if a.node else "/edgepack/index.js"} for d in staged]
        if a.node:
            for b, arg in zip(a.bundles, args):
                print(f"{b.name} (Node): {_summary(_node(arg))}", flush=True)
            return
        with serving({"/": root, "/b": root, "/edgepack": REPO / "web" / "src"}) as url, chromium() as browser:
            for b, arg in zip(a.bundles, args):
                page = browser.new_page()
                try:
                    page.set_default_timeout(600_000)
                    page.goto(url + "/b/")
                    print(f"{b.name} (Chromium): {_summary(page.evaluate(AB, arg))}", flush=True)
                finally:
                    page.close()


if __name__ == "__main__":
    main()
