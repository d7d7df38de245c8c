#!/usr/bin/env python3
"""The benchmark zoo: edgepack vs onnxruntime-web (wasm, same thread count) and native onnxruntime over the
architectures users deploy (bench/models/zoo.py, docs/models.md), not over five favourites.

    python3 bench/zoo.py [--models all|none|NAME,...] [--int8] [--published] [--threads N] [--seconds 2]
                         [--rounds 6] [--slice 0.3] [--out bench/results/zoo.json]

Per model: builds .cache/zoo/NAME.onnx if missing (python3 -m bench.models), packages it (float32, the
model's static shapes), runs bench/node_bench.mjs (edgepack SIMD and relaxed, onnxruntime-web and
onnxruntime-node interleaved in one Node process, outputs checked to agree first), then profiles the bundle
under wasmtime for the share of time per kernel family. --int8 adds the QDQ exports (onnxruntime's
quantize_static, QDQ format, per-channel weights, seeded random calibration) of the INT8 models. --published adds
the published models of issue 18 (bench/published.py: silero VAD files, faster-whisper's silero pair, nudenet, the
onnx wheel's light_* models), packaged as their users package them and run on realistic inputs (--models also takes
their names). Prints a markdown table with the geometric mean of edgepack / onnxruntime-web and writes JSON.
Bounds (1 thread, float32 rows; --no-bounds skips them): the same Node process also times one wasm thread's
multiply-add peak and memory streaming rate in every round (bench/ceilings.mjs), and a second table gives per model
its FLOPs and weight bytes (bench/bounds.py), the compute and memory bounds in ms at those rates, edgepack's time
over the larger bound, and whether 0.5x of onnxruntime-web's time is under the bound (then 0.5x cannot be reached at
one thread and issue 19's rule is: within 1.15x of the bound).
--threads N (N > 1) adds edgepack's threaded build with N threads (onnxruntime-web and native then run N threads
too) and prints its speed-up over our best 1-thread build, with each model's serial profile (bench/serial_profile.py:
the share of 1-thread time in nodes that run on one thread, and the Amdahl bound it sets). The speed-up is timed
twice: beside onnxruntime (in that process, whose onnxruntime pools spin-wait after their runs) and alone (a second
Node process running edgepack only: what a user gets); --threads-run alone|beside takes one, --ort-spin off turns
onnxruntime's spinning off (docs/threads.md, "Measuring the speed-up").
Installs the zoo extra (torchvision, timm, transformers) when missing."""
from __future__ import annotations

import argparse
import datetime
import importlib
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from bench import run  # noqa: E402

ZOO_DIR = REPO / ".cache" / "zoo"
INT8 = ("mobilenet_v3_large", "efficientnet_b0", "resnet50", "squeezenet", "yolo_like", "distilbert")
# int8 rows: edgepack and onnxruntime round at different places (onnxruntime fuses QDQ into its integer kernels),
# and one-step differences grow with depth: agreement within 10% of the output's scale before timing. Exact
# QDQ semantics are what the packager's verification measures (manifest "verification").
INT8_RTOL = 0.1


def ensure_deps() -> None:
    missing = [m for m in ("torchvision", "timm", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"[zoo] installing the zoo extra ({', '.join(missing)} missing)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", f"{REPO}[zoo]"], check=True)


def model_path(name: str) -> Path:
    p = ZOO_DIR / f"{name}.onnx"
    if not p.exists():
        print(f"[zoo] building {name}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "bench.models", str(ZOO_DIR), name], check=True, cwd=REPO)
    return p


def qdq_path(name: str, samples: int = 8) -> Path:
    """The QDQ export a user would make with onnxruntime's own tool (defaults but per-channel weights)."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    out = ZOO_DIR / f"{name}_int8.onnx"
    if out.exists():
        return out
    src, pre = model_path(name), ZOO_DIR / f".{name}_pre.onnx"
    quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
    m = onnx.load(str(pre))
    inits = {i.name for i in m.graph.initializer}
    specs = [(vi.name, [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim], vi.type.tensor_type.elem_type)
             for vi in m.graph.input if vi.name not in inits]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.i = 0

        def get_next(self) -> dict | None:
            if self.i >= samples:
                return None
            rng = np.random.default_rng(self.i)
            self.i += 1
            return {n: (rng.integers(0, 1000, s).astype(np.int64) if t == onnx.TensorProto.INT64
                        else rng.standard_normal(s).astype(np.float32)) for n, s, t in specs}
    quantize_static(str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True)
    pre.unlink(missing_ok=True)
    return out


def kernel_shares(bundle: Path, runs: int = 10, feeds: dict[str, np.ndarray] | None = None) -> dict[str, float]:
    """Share of run time per kernel (median per node over `runs`), edgepack SIMD under wasmtime, on `feeds` (the
    bundle's inputs among them) or seeded random inputs."""
    from packager.bundle import load_bundle
    from packager.cli import node_times_ms
    from packager.plan.opcodes import Op
    from packager.reference import random_inputs
    b = load_bundle(bundle, "simd")
    names = {spec["name"] for spec in b.inputs}
    feeds = b.check_feeds({k: v for k, v in feeds.items() if k in names} if feeds else random_inputs(b.example_inputs()))
    s = b.session()
    s.set_shapes([tuple(feeds[spec["name"]].shape) for spec in b.inputs])

    def write_inputs() -> None:
        for spec in b.inputs:
            s.write(spec["tensor"], feeds[spec["name"]])
    plan, per = node_times_ms(b, s, write_inputs, runs)
    by: dict[str, float] = {}
    for n, t in zip(plan.nodes, per):
        by[Op(n.op).name] = by.get(Op(n.op).name, 0.0) + float(t)
    total = sum(by.values()) or 1.0
    return {k: v / total for k, v in sorted(by.items(), key=lambda kv: -kv[1])}


def alone_run(label: str, model: Path, bundle: Path, a: argparse.Namespace, flags: list[str], inputs: Path | None) -> dict:
    """node_bench.mjs on `bundle` in a Node process of its own that runs edgepack only (its 1-thread builds and its
    threaded build, interleaved; no onnxruntime, whose pools would share the cores): what a user running edgepack
    gets. On `inputs` (a node_bench --save-io directory) if given. The threaded build is checked against the
    1-thread SIMD build's outputs before timing."""
    report = run.BUNDLES_DIR / f"zoo_{label}.alone.json"
    cmd = ["node", *flags, str(BENCH / "node_bench.mjs"), str(model), str(bundle), "--seconds", str(a.seconds),
           "--rounds", str(a.rounds), "--slice", str(a.slice), "--variants", a.variants, "--threads", str(a.threads),
           "--no-ort-web", "--no-native", "--json", str(report), "--atol", str(a.atol), "--rtol", str(a.rtol)] \
        + (["--inputs", str(inputs)] if inputs else [])
    print("[zoo] " + " ".join(cmd), file=sys.stderr)
    if subprocess.run(cmd, cwd=BENCH).returncode != 0:
        return {"error": "node_bench.mjs (edgepack alone) failed"}
    return json.loads(report.read_text())


def geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def table(rows: list[dict], mach: str) -> str:
    out = ["| model | edgepack ms | ort-web ms | native ms | edgepack/ort-web | edgepack/native | CPU-time ratios ort-web, "
           "native | where edgepack's time goes |", "|---|---|---|---|---|---|---|---|"]
    ratios, cpu = [], []
    for r in rows:
        if "error" in r:
            out.append(f"| {r['model']} | {r['error']} | | | | | | |")
            continue
        rt, ep = r["runtimes"], run.best_edgepack(r)
        ms = lambda k: f"{rt[k]['median_ms']:.2f}" if k in rt else "n/a"  # noqa: E731
        ra = lambda o: r["ratios"].get(f"{ep}/{o}", {}).get("of_medians")  # noqa: E731
        web, nat = ra("ort-web"), ra("native")
        # Under load, runs longer than a scheduler slice wait out other processes' slices: wall medians of short
        # runs drift far from their CPU time (docs/benchmarks.md), CPU-time ratios of paired rounds do not.
        cw, cn = (r["ratios"].get(f"{ep}/{o}", {}).get("cpu_paired_median") for o in ("ort-web", "native"))
        if web:
            ratios.append(web)
        if cw:
            cpu.append(cw)
        cpus = f"{cw:.2f}, {cn:.2f}" if cw and cn else ""
        shares = ", ".join(f"{k} {v:.0%}" for k, v in list(r.get("kernels", {}).items())[:3])
        out.append(f"| {r['model']} | {ms(ep)} ({ep.removeprefix('edgepack-')}) | {ms('ort-web')} | {ms('native')} | "
                   f"{web:.2f} | {nat:.2f} | {cpus} | {shares} |" if web and nat else
                   f"| {r['model']} | {ms(ep)} | {ms('ort-web')} | {ms('native')} | {web} | {nat} | {cpus} | {shares} |")
    ok = sum(1 for r in rows if "error" not in r)
    out.append(f"\n{ok} of {len(rows)} models ran; geometric mean edgepack/ort-web over them: {geomean(ratios):.2f} "
               f"(CPU time: {geomean(cpu):.2f}) ({mach})")
    return "\n".join(out)


def bounds_table(rows: list[dict], cache_bytes: int, mach: str) -> str:
    """Per model with bounds: FLOPs, weights, the compute and memory bounds (CPU ms at the ceilings measured in the
    same rounds), edgepack's CPU time over the larger bound, and issue 19's verdict."""
    out = ["| model | GFLOP | weights MB | compute bound ms | memory bound ms | edgepack CPU ms | edgepack / bound | "
           "0.5x ort-web / bound (under 1: unreachable) | within 1.15x |", "|---|---|---|---|---|---|---|---|---|"]
    yes = lambda v: "" if v is None else "**yes**" if v else "no"  # noqa: E731
    bs = [(r["model"], r["bounds"]) for r in rows if "bounds" in r]
    for name, b in bs:
        mem = f"{b['memory_ms']:.2f}" if b["memory_ms"] is not None else "cached"
        x = f"{b['x_of_bound']:.2f} ({b['bound']})" if "x_of_bound" in b else "n/a"
        half = f"{b['half_ort_web_over_bound']:.2f} ({yes(b['half_unreachable'])})" if "half_unreachable" in b else ""
        out.append(f"| {name} | {b['gflop']:.3f} | {b['weight_mb']:.1f} | {b['compute_ms']:.2f} | {mem} | "
                   f"{b['edgepack_cpu_ms']:.2f} ({b['edgepack'].removeprefix('edgepack-')}) | {x} | {half} | "
                   f"{yes(b.get('within_1_15')) if b.get('half_unreachable') else ''} |")
    if not bs:
        return "\n".join(out)
    med = lambda k: float(np.median([b[k] for _, b in bs]))  # noqa: E731
    capped = [n for n, b in bs if b.get("half_unreachable")]
    within = [n for n, b in bs if b.get("half_unreachable") and b.get("within_1_15")]
    out.append(f"\nCeilings of one wasm thread, measured in every round of each model's run (CPU time, median over the "
               f"models): multiply-add peak {med('peak_gflops'):.1f} GFLOP/s (the better of SIMD128 mul+add and relaxed "
               f"FMA), memory stream {med('stream_gbs'):.1f} GB/s; last-level cache {cache_bytes >> 20} MB (weights that "
               f"fit: no memory bound, 'cached'). FLOPs are those of the direct algorithms (a Winograd layer does 2.25-4x "
               f"fewer multiplies: such a model can run under its bound); elementwise, normalization and pooling work is "
               f"not counted. 0.5x of onnxruntime-web is under the bound (unreachable at one thread) for "
               f"{len(capped)} of {len(bs)}: {', '.join(capped) or 'none'}; within 1.15x of their bound: "
               f"{', '.join(within) or 'none'} ({mach})")
    return "\n".join(out)


def bounds_row(rep: dict, model: Path, bundle: Path, cache_bytes: int) -> dict:
    """bench/bounds.py's work of `model` at the bundle's input shapes, against the ceilings of rep's rounds."""
    from bench.bounds import model_work, paired_bounds
    manifest = json.loads((bundle / "manifest.json").read_text())
    shapes = {i["name"]: tuple(d if isinstance(d, int) else 1 for d in i["shape"]) for i in manifest["inputs"]}
    cpu = rep["cpu_round_ms"]
    # the best build by CPU time: under load the wall-clock medians that pick the table's build mostly measure others
    ep = min((k for k in cpu if k.startswith("edgepack-") and k != "edgepack-threads"), key=lambda k: np.median(cpu[k]))
    return {"edgepack": ep, **paired_bounds(model_work(model, shapes), rep["ceilings"], cpu[ep], cpu.get("ort-web"),
                                            cache_bytes)}


def speedup(rep: dict | None) -> dict:
    """The threaded build's paired speed-up over our best 1-thread build in one node_bench report ({} if none)."""
    if not rep or "error" in rep:
        return {}
    one = run.best_edgepack(rep)
    return {**rep["ratios"][f"{one}/edgepack-threads"], "one": one, "one_ms": rep["runtimes"][one]["median_ms"],
            "threads_ms": rep["runtimes"]["edgepack-threads"]["median_ms"]} \
        if one and f"{one}/edgepack-threads" in rep.get("ratios", {}) else {}


def threads_table(rows: list[dict], threads: int, mach: str) -> str:
    """Per model the threaded build's speed-up over our best 1-thread build measured twice: alone (a Node process
    running edgepack only, as a user does) and beside onnxruntime (the process that also runs onnxruntime-web and
    native with N threads, interleaved: their pools' threads spin-wait after their runs); each with its rounds'
    min-max, the others' times at N threads and the serial profile; geometric means of both speed-ups."""
    ms = lambda x: f"{x:.2f}"  # noqa: E731
    spread = lambda u: f"{u['paired_min']:.2f}-{u['paired_max']:.2f}" if "paired_min" in u else ""  # noqa: E731
    out = [f"| model | edgepack 1 thread ms | edgepack {threads} threads ms | speed-up alone | per round (min-max) | "
           f"speed-up beside onnxruntime | per round (min-max) | ort-web {threads} threads ms | threads/ort-web | "
           f"native {threads} threads ms | threads/native | serial share | Amdahl bound | serial kernels | machine |",
           "|---" * 15 + "|"]
    for r in rows:
        alone, beside = speedup(r.get("alone")), speedup(r if "ratios" in r else None)
        first = alone or beside
        if "error" in r or not first:
            out.append(f"| {r['model']} | {r.get('error', 'no threaded run')} |" + " |" * 12 + f" {mach} |")
            continue
        rt, ra, prof = r.get("runtimes", {}), r.get("ratios", {}), r.get("serial") or {}
        f = lambda k: ms(rt[k]["median_ms"]) if k in rt else "n/a"  # noqa: E731
        q = lambda k: f"{ra[k]['paired_median']:.2f}" if k in ra else "n/a"  # noqa: E731
        out.append(f"| {r['model']} | {ms(first['one_ms'])} ({first['one'].removeprefix('edgepack-')}) | {ms(first['threads_ms'])} | "
                   + (f"{alone['paired_median']:.2f} | {spread(alone)} | " if alone else "n/a | | ")
                   + (f"{beside['paired_median']:.2f} | {spread(beside)} | " if beside else "n/a | | ")
                   + f"{f('ort-web')} | {q('edgepack-threads/ort-web')} | {f('native')} | {q('edgepack-threads/native')} | "
                   + (f"{prof['serial_share']:.1%} | {prof['bound']:.2f} | " if prof else " |  | ")
                   + ", ".join(f"{k} {v:.1%}" for k, v in list(prof.get("serial_kinds", {}).items())[:3]) + f" | {mach} |")
    geo = lambda key: [speedup(r.get("alone") if key == "alone" else r if "ratios" in r else None).get("paired_median") for r in rows]  # noqa: E731
    alone, beside = ([x for x in geo(k) if x] for k in ("alone", "beside"))
    bounds = [r["serial"]["bound"] for r in rows if r.get("serial")]
    tail = [f"{len(alone)} models alone" + (f", geometric-mean speed-up of {threads} threads over our best 1-thread build: "
                                            f"{geomean(alone):.2f}x" if alone else ""),
            f"{len(beside)} models beside onnxruntime" + (f": {geomean(beside):.2f}x" if beside else "")]
    if bounds:
        tail.append(f"geometric mean of the Amdahl bounds: {geomean(bounds):.2f}x")
    return "\n".join(out) + "\n\n" + "; ".join(tail) + f" ({mach})"


def serial_table(rows: list[dict], threads: int) -> str:
    out = ["| model | 1-thread ms (nodes alone) | serial share | Amdahl bound | serial kernels (share of 1-thread time) |",
           "|---|---|---|---|---|"]
    for r in rows:
        p = r.get("serial")
        out.append(f"| {r['model']} | {p['total_ms']:.1f} | {p['serial_share']:.1%} | {p['bound']:.2f} | "
                   + ", ".join(f"{k} {v:.1%}" for k, v in list(p["serial_kinds"].items())[:4]) + " |" if p else
                   f"| {r['model']} | {r.get('error') or r.get('serial_error', '')} | | | |")
    bounds = [r["serial"]["bound"] for r in rows if r.get("serial")]
    return "\n".join(out) + f"\n\ngeometric mean of the Amdahl bounds at {threads} threads: {geomean(bounds):.2f}x"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="all")
    ap.add_argument("--int8", action="store_true", help=f"also the QDQ exports of {', '.join(INT8)}")
    ap.add_argument("--published", action="store_true", help="also the published models (bench/published.py)")
    ap.add_argument("--out", default=str(BENCH / "results" / "zoo.json"))
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--slice", type=float, default=0.3)
    ap.add_argument("--variants", default="simd,relaxed")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--threads-run", choices=("both", "alone", "beside"), default="both",
                    help="with --threads N: time the speed-up in a process running edgepack alone, beside onnxruntime "
                         "(the process comparing with onnxruntime at N threads), or both (default)")
    ap.add_argument("--ort-spin", choices=("on", "off"), default="on",
                    help="onnxruntime's intra-op threads spin-wait after a run (on: its default) or not")
    ap.add_argument("--pause", type=float, default=0.0, metavar="MS", help="idle pause before each runtime's slice")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--no-profile", action="store_true", help="skip the per-kernel profile")
    ap.add_argument("--no-serial", action="store_true", help="with --threads N: skip the serial profiles (they need no "
                    "idle machine: bench/serial_profile.py or --serial-only take them at any load)")
    ap.add_argument("--no-bounds", action="store_true", help="skip the ceilings and bounds (bench/bounds.py)")
    ap.add_argument("--stream-mb", type=int, default=0,
                    help="buffer the memory ceiling streams (default: 4x the last-level cache, at least 256 MB)")
    ap.add_argument("--serial-only", action="store_true",
                    help="with --threads N: package and print the serial profiles only, no timing (any load)")
    a = ap.parse_args(argv)
    if a.serial_only and a.threads < 2:
        raise SystemExit("--serial-only profiles a threaded run: give --threads N (N > 1)")
    if a.threads_run != "both" and a.threads < 2:
        raise SystemExit("--threads-run chooses how the threaded build is timed: give --threads N (N > 1)")
    alone_only = a.threads > 1 and a.threads_run == "alone"
    a.native = "node"
    ensure_deps()
    from bench.models.registry import ZOO_NAMES
    from bench.published import PUBLISHED
    names = list(ZOO_NAMES) if a.models == "all" else [] if a.models == "none" else \
        [n.strip() for n in a.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in ZOO_NAMES and n not in PUBLISHED]
    if unknown:
        raise SystemExit(f"unknown zoo model(s): {', '.join(unknown)} (choose from {', '.join([*ZOO_NAMES, *PUBLISHED])})")
    pub = [n for n in names if n in PUBLISHED] + ([n for n in PUBLISHED if n not in names] if a.published else [])
    names = [n for n in names if n in ZOO_NAMES]
    jobs = [(n, lambda n=n: model_path(n)) for n in names]
    if a.int8:
        jobs += [(f"{n}_int8", lambda n=n: qdq_path(n)) for n in names if n in INT8]
    jobs += [(n, PUBLISHED[n].fetch) for n in pub]
    flags, mach = run.node_flags(), run.machine()
    with_bounds = not (a.no_bounds or a.serial_only or a.threads > 1)
    cache = 0
    if with_bounds:
        from bench.bounds import last_level_cache_bytes
        from bench.fma_peak import build_all
        cache = last_level_cache_bytes()
        ceilings = ["--ceilings", str(build_all(run.BUNDLES_DIR / "ceilings")),
                    "--stream-mb", str(a.stream_mb or max(256, 4 * (cache >> 20)))]
    rows = []
    for label, make in jobs:
        try:
            path = make()
        except Exception as e:  # noqa: BLE001 - a model that does not export is a row, not the end of the run
            rows.append({"model": label, "error": f"export failed: {str(e).splitlines()[0][:120]}"})
            continue
        opts = argparse.Namespace(**{**vars(a), "atol": 0.0, "rtol": INT8_RTOL}) if label.endswith("_int8") else a
        feeds, kw = None, {}
        if label in PUBLISHED:
            p = PUBLISHED[label]
            feeds, kw = p.feeds(path), {"input_shapes": p.input_shapes or None, "constants": p.constants or None}
        bundle = run.BUNDLES_DIR / f"zoo_{label}"
        if a.serial_only or alone_only:
            from packager import package
            try:
                package(path, out=bundle, dynamic=False, verify=False, **kw)
                rep = {"model": label}
            except Exception as e:  # noqa: BLE001 - a row, not the end of the run
                rep = {"model": label, "error": f"packaging failed: {str(e).splitlines()[0][:120]}"}
            if alone_only and "error" not in rep:
                rep["alone"] = alone_run(label, path, bundle, opts, flags,
                                         run.write_inputs(run.BUNDLES_DIR / f"zoo_{label}.in", feeds) if feeds else None)
        else:
            bounded = with_bounds and not label.endswith("_int8")   # the float32 ceiling does not bound int8 kernels
            rep = run.bench_model(f"zoo_{label}", opts, flags, model=path, package_kwargs=kw, inputs=feeds,
                                  node_args=(ceilings if bounded else []) + ["--ort-spin", a.ort_spin, "--pause", str(a.pause)])
            if a.threads > 1 and a.threads_run == "both" and "error" not in rep:   # the same bundle and inputs
                rep["alone"] = alone_run(label, path, bundle, opts, flags, run.BUNDLES_DIR / f"zoo_{label}.io")
            if bounded and "error" not in rep:
                try:
                    rep["bounds"] = bounds_row(rep, path, bundle, cache)
                except Exception as e:  # noqa: BLE001 - a model whose work cannot be counted still has its timing row
                    rep["bounds_error"] = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        rep["model"] = label
        if "error" not in rep and not a.no_profile and not a.serial_only and not alone_only:
            rep["kernels"] = kernel_shares(bundle, feeds=feeds)
        if "error" not in rep and a.threads > 1 and not a.no_serial:
            from bench.serial_profile import serial_profile
            try:
                rep["serial"] = serial_profile(bundle, a.threads)
            except RuntimeError as e:
                rep["serial_error"] = str(e)
        rows.append(rep)
        if a.serial_only:
            from bench.serial_profile import summary
            print(f"{label}: " + (summary(rep["serial"]) if "serial" in rep else rep.get("error") or rep["serial_error"]),
                  file=sys.stderr)
            continue
        print((threads_table(rows[-1:], a.threads, mach.replace("1 thread", f"{a.threads} threads")) if a.threads > 1
               else table(rows[-1:], mach)).splitlines()[2],
              file=sys.stderr)
        if "bounds" in rep:
            print(bounds_table(rows[-1:], cache, mach).splitlines()[2], file=sys.stderr)
    # with N threads, onnxruntime-web and native ran N threads: the 1-thread table's ratios would compare unlike runs
    md = serial_table(rows, a.threads) if a.serial_only else \
        threads_table(rows, a.threads, mach.replace("1 thread", f"{a.threads} threads")) if a.threads > 1 else table(rows, mach)
    print("\n" + md)
    bt = bounds_table(rows, cache, mach) if with_bounds else ""
    if bt:
        print("\n" + bt)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    out.write_text(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                               "commit": commit, "machine": mach, "table": md, "bounds_table": bt, "models": rows}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
