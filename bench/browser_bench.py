"""edgepack vs onnxruntime-web in headless Chromium (a benchmark, not a test): per model, both runtimes in ONE
page on the same input, outputs checked to agree, a warm-up by time (alternating), then interleaved rounds
(edgepack slice, onnxruntime-web slice, ...) so machine-wide slowdowns hit both alike; the ratio is the median
of the per-round ratios of medians. Then loading cost: a fresh browser context per measurement, from importing
the runtime's JS to the first result (edgepack: import + load(bundle) + run, SHA-256 checks included;
onnxruntime-web: import + InferenceSession.create + run), alternating, median of --load-reps.

    python3 -m bench.browser_bench [--models mobilenetv2,resnet18,cifar10net,minilm_like] [--seconds 3]
        (--models takes zoo models too: python3 -m bench.browser_bench --models mobilenet_v3_large,distilbert,...;
         --models zoo: issue 19's Chromium subset, ZOO_SUBSET below: 10 zoo models, three of them transformers;
         --models zoo-all: every zoo model and its int8 QDQ export, NAME_int8, as bench/zoo.py --int8 runs them)
        [--rounds 8] [--slice 0.5] [--load-reps 5 (0: no loading pass)] [--threads N] [--json bench/results/browser.json]

Prints per model the ratio edgepack / onnxruntime-web, then how many are at or under 0.5 and the geometric mean.

Single-threaded: edgepack threads=1 vs onnxruntime-web numThreads=1. With --threads N (N > 1), a second pass on a
cross-origin isolated page: edgepack threads=N (when the bundle has a threaded build) vs onnxruntime-web
numThreads=N, each runtime alone for --slice seconds per round with a pause after it: both keep worker pools
whose threads spin between runs, so runs alternating one by one would measure each pool taking the other's
cores (session 7: both runtimes 1.5-3x slower than alone)."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from packager import package  # noqa: E402
from packager.reference import random_inputs  # noqa: E402
from tests.browser_env import ISOLATED, chromium, chromium_missing, evaluate_fresh, serving  # noqa: E402

ORT_DIST = REPO / "bench" / "node_modules" / "onnxruntime-web" / "dist"
MODELS = ["mobilenetv2", "resnet18", "cifar10net", "minilm_like"]
# issue 19: "Chromium (1 thread) on at least 8 zoo models, including two transformers"
ZOO_SUBSET = ["mobilenet_v3_large", "efficientnet_b0", "resnet50", "shufflenet_v2", "ghostnet", "squeezenet", "yolo_like",
              "deit_tiny", "distilbert", "vit_small"]

# In the page: both runtimes on one model, agreement check, warm-up by time, interleaved rounds.
LATENCY = """async ({ m, seconds, rounds, slice, threads, variant, prefix, pattern, settle }) => {
  const ep = await import(prefix + '/edgepack/index.js');
  const ort = await import(prefix + '/ort/ort.wasm.min.mjs');
  // The same path prefix as the page: ORT's worker script must come with the page's COOP/COEP headers too,
  // else the isolated page cannot start it and InferenceSession.create waits forever.
  ort.env.wasm.wasmPaths = location.origin + prefix + '/ort/';
  ort.env.wasm.numThreads = threads;
  const ctors = { float32: Float32Array, int64: BigInt64Array };
  const epFeeds = {}, ortFeeds = {};
  for (const x of m.inputs) {
    const data = new ctors[x.dtype](await (await fetch(x.url)).arrayBuffer());
    epFeeds[x.name] = { data, dims: x.dims };
    ortFeeds[x.name] = new ort.Tensor(x.dtype, data, x.dims);
  }
  const s = await ep.load(m.bundle, { backend: 'wasm', threads, variant });
  const o = await ort.InferenceSession.create(m.onnx, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
  const a = await s.run(epFeeds), b = await o.run(ortFeeds);
  let diff = 0;
  for (const k of Object.keys(a)) for (let i = 0; i < a[k].data.length; i++) diff = Math.max(diff, Math.abs(a[k].data[i] - b[k].data[i]));
  const runners = [['edgepack', () => s.run(epFeeds)], ['onnxruntime-web', () => o.run(ortFeeds)]];
  for (const end = performance.now() + seconds * 1000; performance.now() < end;) for (const [, f] of runners) await f();
  const rounds_ = [];
  for (let r = 0; r < rounds; r++) {   // single runs alternating A B B A A B ..., for `slice` seconds per runtime
    const round = { edgepack: [], 'onnxruntime-web': [] };
    const stop = performance.now() + 2 * slice * 1000;
    if (pattern === 'slices') {   // each runtime alone for `slice` seconds (as bench/node_bench.mjs): its own caches
      for (const [k, f] of r % 2 ? [...runners].reverse() : runners) {
        const end = performance.now() + slice * 1000;
        for (let i = 0; performance.now() < end || i < 2; i++) { const t0 = performance.now(); await f(); round[k].push(performance.now() - t0); }
        if (settle) await new Promise((res) => setTimeout(res, settle));   // the other pool's workers go idle
      }
    } else for (let i = 0; performance.now() < stop || i < 2; i++) {
      for (const [k, f] of i % 2 ? [...runners].reverse() : runners) { const t0 = performance.now(); await f(); round[k].push(performance.now() - t0); }
    }
    rounds_.push(round);
  }
  const res = { variant: s.variant, features: { ...s.features }, notes: [...s.notes], ortThreads: ort.env.wasm.numThreads,
    maxAbsDiff: diff, rounds: rounds_, isolated: globalThis.crossOriginIsolated };
  s.destroy();
  await o.release();
  return res;
}"""

# In a fresh context: one runtime from importing its JS to its first result.
LOADING = """async ({ which, m }) => {
  const ctors = { float32: Float32Array, int64: BigInt64Array };
  const inputs = [];
  for (const x of m.inputs) inputs.push([x, new ctors[x.dtype](await (await fetch(x.url)).arrayBuffer())]);
  const t0 = performance.now();
  if (which === 'edgepack') {
    const ep = await import('/edgepack/index.js');
    const s = await ep.load(m.bundle, { threads: 1 });
    await s.run(Object.fromEntries(inputs.map(([x, d]) => [x.name, { data: d, dims: x.dims }])));
    return { ms: performance.now() - t0, variant: s.variant };
  }
  const ort = await import('/ort/ort.wasm.min.mjs');
  ort.env.wasm.wasmPaths = location.origin + '/ort/';
  ort.env.wasm.numThreads = 1;
  const o = await ort.InferenceSession.create(m.onnx, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
  await o.run(Object.fromEntries(inputs.map(([x, d]) => [x.name, new ort.Tensor(x.dtype, d, x.dims)])));
  return { ms: performance.now() - t0 };
}"""


def _source(name: str) -> Path:
    """A benchmark model (.cache/models, scripts/setup.sh builds them) or a zoo model (built on demand)."""
    from bench.models.registry import ZOO_NAMES
    from bench.zoo import INT8, ensure_deps, model_path, qdq_path
    if name in ZOO_NAMES:
        ensure_deps()
        return model_path(name)
    if name.endswith("_int8") and name[:-len("_int8")] in INT8:   # the zoo's QDQ export (bench/zoo.py --int8)
        ensure_deps()
        return qdq_path(name[:-len("_int8")])
    src = REPO / ".cache" / "models" / f"{name}.onnx"
    if not src.exists():
        raise SystemExit(f"{src} missing: run scripts/setup.sh (or name a zoo model: bench/models/registry.py)")
    return src


def _all_zoo() -> list[str]:
    """Every zoo model and its int8 QDQ export where bench/zoo.py --int8 makes one."""
    from bench.models.registry import ZOO_NAMES
    from bench.zoo import INT8
    return list(ZOO_NAMES) + [f"{n}_int8" for n in INT8]


def _prepare(root: Path, name: str) -> dict:
    src = _source(name)
    bundle = package(src, out=root / "bundles" / name, verify=False, dynamic=False)   # static plan, batch 1
    (root / "onnx").mkdir(exist_ok=True)
    (root / "onnx" / f"{name}.onnx").write_bytes(src.read_bytes())
    manifest = json.loads((bundle / "manifest.json").read_text())
    inputs = []
    for i, (k, a) in enumerate(random_inputs(manifest["inputs"], seed=1).items()):
        f = root / "data" / f"{name}-{i}.bin"
        f.parent.mkdir(exist_ok=True)
        f.write_bytes(np.ascontiguousarray(a).tobytes())
        inputs.append({"name": k, "dtype": a.dtype.name, "dims": list(a.shape), "url": f"/data/{f.name}"})
    return {"name": name, "bundle": f"/bundles/{name}/", "onnx": f"/onnx/{name}.onnx", "inputs": inputs}


def _summary(res: dict) -> dict:
    med = {k: statistics.median(t for r in res["rounds"] for t in r[k]) for k in ("edgepack", "onnxruntime-web")}
    ratios = [statistics.median(r["edgepack"]) / statistics.median(r["onnxruntime-web"]) for r in res["rounds"]]
    return {"edgepack_ms": med["edgepack"], "ort_web_ms": med["onnxruntime-web"], "ratio": statistics.median(ratios),
            "ratio_min": min(ratios), "ratio_max": max(ratios), "runs": sum(len(r["edgepack"]) for r in res["rounds"])}


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]


def _pass_summary(rows: dict[str, dict]) -> dict:
    """How many ran, how many at or under 0.5x onnxruntime-web, the geometric mean of the ratios."""
    ratios = [s["ratio"] for s in rows.values() if "error" not in s]
    return {"models": len(rows), "ran": len(ratios), "at_or_under_half": sum(r <= 0.5 for r in ratios),
            "geomean": statistics.geometric_mean(ratios) if ratios else None}


def _markdown(rows: dict[str, dict], threads: int) -> str:
    """The pass as a markdown table (docs/benchmarks.md), with the geometric mean of the ratios."""
    out = [f"| model | edgepack ms | ort-web ms | edgepack/ort-web (per-round min..max) | max abs diff | edgepack build |",
           "|---|---|---|---|---|---|"]
    for n, s in rows.items():
        if "error" in s:
            out.append(f"| {n} | {s['error']} | | | | |")
            continue
        out.append(f"| {n} | {s['edgepack_ms']:.2f} | {s['ort_web_ms']:.2f} | {s['ratio']:.2f} ({s['ratio_min']:.2f}.."
                   f"{s['ratio_max']:.2f}) | {s['max_abs_diff']:.1e} | {s['variant']}, {s['features']['threads']} thread(s) |")
    t = _pass_summary(rows)
    gm = f"{t['geomean']:.2f}" if t["geomean"] else "n/a"
    out.append(f"\n{t['ran']} of {t['models']} ran at {threads} thread(s); {t['at_or_under_half']} at or under 0.5; "
               f"geometric mean edgepack/ort-web {gm}")
    return "\n".join(out)


def _prefix(isolated: bool, m: dict) -> dict:
    p = ISOLATED if isolated else ""
    return dict(m, bundle=p + m["bundle"], onnx=p + m["onnx"], inputs=[dict(x, url=p + x["url"]) for x in m["inputs"]])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--seconds", type=float, default=3.0, help="warm-up per model (both runtimes alternating)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--slice", type=float, default=1.0, help="seconds per runtime per round")
    ap.add_argument("--load-reps", type=int, default=5)
    ap.add_argument("--load-model", default="mobilenetv2")
    ap.add_argument("--threads", type=int, default=0, help="also compare threaded (N threads each, isolated page)")
    ap.add_argument("--variant", default="auto", help="edgepack wasm variant (auto: relaxed SIMD in Chromium)")
    ap.add_argument("--pattern", choices=["alternate", "slices"], default="alternate",
                    help="alternate: single runs A B B A ... (each runtime runs after the other half the time: caches "
                         "shared); slices: each runtime alone for --slice seconds per round, as bench/node_bench.mjs")
    ap.add_argument("--json", type=Path, default=REPO / "bench" / "results" / "browser.json")
    a = ap.parse_args(argv)
    why = chromium_missing()
    if why:
        raise SystemExit(why)
    if not (ORT_DIST / "ort.wasm.min.mjs").exists():
        raise SystemExit("onnxruntime-web missing in bench/node_modules: run scripts/setup.sh")
    report: dict = {"latency": {}, "threaded": {}, "loading": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "index.html").write_text("<!doctype html><meta charset=utf-8><title>edgepack bench</title>\n")
        names = ZOO_SUBSET if a.models == "zoo" else _all_zoo() if a.models == "zoo-all" else \
            [n for n in a.models.split(",") if n]
        models: dict[str, dict] = {}
        for n in dict.fromkeys(names + ([a.load_model] if a.load_reps > 0 else [])):   # a failure is a row, not the end
            try:
                models[n] = _prepare(root, n)
            except Exception as e:  # noqa: BLE001
                report["latency"][n] = {"error": f"prepare failed: {_first_line(e)}"}
                print(f"{n}: prepare failed: {_first_line(e)}")
        with serving({"/": root, "/edgepack": REPO / "web" / "src", "/ort": ORT_DIST}) as url, chromium() as browser:
            passes = [("latency", 1, False)] + ([("threaded", a.threads, True)] if a.threads > 1 else [])
            for key, threads, isolated in passes:
                print(f"\n== {key}: edgepack (threads={threads}) vs onnxruntime-web (numThreads={threads}), Chromium headless")
                print(f"{'model':<13}{'edgepack ms':>13}{'ort-web ms':>12}{'ratio':>8}  (per-round min..max)   max|diff|  edgepack build")
                for n in [n for n in names if n in models]:
                    try:   # a page that fails (out of memory, a runtime's error) is a row; the run goes on
                        res = evaluate_fresh(browser, url + (ISOLATED if isolated else "") + "/index.html", LATENCY,
                                             {"m": _prefix(isolated, models[n]), "seconds": a.seconds, "rounds": a.rounds,
                                              "slice": a.slice, "threads": threads, "variant": a.variant,
                                              "pattern": "slices" if threads > 1 else a.pattern,
                                              "settle": 200 if threads > 1 else 0, "prefix": ISOLATED if isolated else ""})
                    except Exception as e:  # noqa: BLE001
                        report[key][n] = {"error": _first_line(e)}
                        print(f"{n:<13}error: {_first_line(e)}")
                        continue
                    s = dict(_summary(res), max_abs_diff=res["maxAbsDiff"], variant=res["variant"], features=res["features"],
                             notes=res["notes"], ort_threads=res["ortThreads"])
                    report[key][n] = s
                    build = f"{res['variant']}, {res['features']['threads']} thread(s)"
                    print(f"{n:<13}{s['edgepack_ms']:>13.2f}{s['ort_web_ms']:>12.2f}{s['ratio']:>8.2f}  ({s['ratio_min']:.2f}..{s['ratio_max']:.2f})"
                          f"{'':>10}{s['max_abs_diff']:.1e}  {build}")
                    if res["notes"] and threads > 1:
                        print(f"{'':<13}note: {'; '.join(res['notes'])}")
                print(_markdown(report[key], threads))
            m = models.get(a.load_model) if a.load_reps > 0 else None
            times: dict[str, list[float]] = {"edgepack": [], "onnxruntime-web": []}
            for _ in range(a.load_reps if m else 0):
                for which in times:
                    ctx = browser.new_context()   # nothing cached: the loading cost from scratch
                    times[which].append(evaluate_fresh(ctx, url + "/index.html", LOADING, {"which": which, "m": m})["ms"])
                    ctx.close()
            if m:
                med = {k: statistics.median(v) for k, v in times.items()}
                report["loading"] = {"model": a.load_model, **{f"{k}_ms": v for k, v in med.items()},
                                     "ratio": med["edgepack"] / med["onnxruntime-web"], "samples": times}
                print(f"\n== loading {a.load_model}: import runtime -> first result, fresh context, median of {a.load_reps}")
                print(f"edgepack {med['edgepack']:.0f} ms, onnxruntime-web {med['onnxruntime-web']:.0f} ms, "
                      f"ratio {report['loading']['ratio']:.2f}")
    for k in ("latency", "threaded"):
        if report[k]:
            report[f"{k}_summary"] = _pass_summary(report[k])
            report[f"{k}_markdown"] = _markdown(report[k], 1 if k == "latency" else a.threads)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
