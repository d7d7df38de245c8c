#!/usr/bin/env python3
"""Benchmark edgepack against onnxruntime-web (wasm, 1 thread) and native onnxruntime (1 thread).

    python3 bench/run.py [--models cifar10net,mobilenetv2,resnet18,minilm_like] [--out bench/results/latest.json]
                         [--seconds 3] [--rounds 10] [--slice 0.5] [--variants simd,relaxed] [--threads N]

For each model: builds .cache/models/NAME.onnx if missing (python3 -m bench.models), packages it into
.cache/bundles/NAME, runs bench/node_bench.mjs (all runtimes interleaved in one Node process, outputs checked
first), and, if onnxruntime-node is not usable there, times native onnxruntime from Python on the same inputs.
Prints a markdown table and writes JSON. The model name `tiny` is built in (view ops only): it tests the
harness itself and measures per-call overhead, not kernels. Run `npm install` in bench/ first.
--threads N adds edgepack-threads.wasm with N threads and runs onnxruntime-web / native with N threads too
(the table then compares the threaded build with the single-threaded SIMD build and with them).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from bench.timing import interleaved_ms  # noqa: E402
from packager.reference import ORT_MAX_IR  # noqa: E402

MODELS_DIR = REPO / ".cache" / "models"
BUNDLES_DIR = REPO / ".cache" / "bundles"
DEFAULT_MODELS = "cifar10net,mobilenetv2,resnet18,minilm_like"
RELAXED_FLAG = "--experimental-wasm-relaxed-simd"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, 1 thread"


def tiny_model(path: Path) -> Path:
    """Image-sized input through view ops only: what every runtime pays per call (copy in, copy out)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    s = numpy_helper.from_array(np.array([1, 3 * 224 * 224], np.int64), "shape")
    g = helper.make_graph([helper.make_node("Reshape", ["input", "shape"], ["r"]), helper.make_node("Identity", ["r"], ["output"])],
                          "tiny", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3 * 224 * 224])], [s])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(m, str(path))
    return path


def model_file(name: str) -> Path:
    p = MODELS_DIR / f"{name}.onnx"
    if name == "tiny":
        return p if p.exists() else tiny_model(p)
    if not p.exists():
        print(f"[bench] building {name} with python3 -m bench.models", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "bench.models", str(MODELS_DIR), name], check=True, cwd=REPO)
    return p


def node_flags() -> list[str]:
    """Node 20 hides relaxed SIMD behind a flag; newer Node may no longer know the flag."""
    ok = subprocess.run(["node", RELAXED_FLAG, "-e", "0"], capture_output=True).returncode == 0
    return [RELAXED_FLAG] if ok else []


def python_native(model: Path, io_dir: Path, seconds: float, rounds: int, slice_s: float, atol: float, rtol: float) -> dict:
    """Native onnxruntime (intra_op_num_threads=1) from Python, on node_bench's inputs; checks its answer too.
    Runs after node_bench, not interleaved with it: take its ratio with a pinch of salt."""
    import onnx
    import onnxruntime as ort
    index = json.loads((io_dir / "io.json").read_text())

    def arr(meta: dict) -> np.ndarray:
        return np.fromfile(io_dir / meta["file"], dtype=np.dtype(meta["dtype"])).reshape(meta["dims"])

    feeds = {k: arr(v) for k, v in index["inputs"].items()}
    m = onnx.load(str(model))
    m.ir_version = min(m.ir_version, ORT_MAX_IR)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    got = dict(zip(names, sess.run(names, feeds)))
    diff = 0.0
    for k, meta in index["outputs"].items():
        want, have = arr(meta).astype(np.float64), got[k].astype(np.float64)
        d = float(np.max(np.abs(want - have))) if want.size else 0.0
        if not d <= atol + rtol * float(np.max(np.abs(have), initial=0.0)):
            raise SystemExit(f"REFUSING TO BENCHMARK: edgepack and native onnxruntime disagree on '{k}': max abs diff {d:.3g}")
        diff = max(diff, d)
    xs = interleaved_ms({"native": lambda: sess.run(names, feeds)}, seconds, rounds, slice_s)["native"]
    q = np.percentile(xs, [10, 50, 90])
    return {"n": len(xs), "median_ms": float(q[1]), "p10_ms": float(q[0]), "p90_ms": float(q[2]), "min_ms": min(xs),
            "detail": f"onnxruntime {ort.__version__} (Python), intra_op_num_threads=1, not interleaved",
            "max_abs_diff_vs_edgepack": diff}


def write_inputs(io_dir: Path, feeds: dict[str, np.ndarray]) -> Path:
    """`feeds` as node_bench.mjs --inputs reads them (the layout its --save-io writes): raw files + io.json."""
    io_dir.mkdir(parents=True, exist_ok=True)
    index: dict = {"inputs": {}, "outputs": {}}
    for i, (k, v) in enumerate(feeds.items()):
        (io_dir / f"inputs_{i}.bin").write_bytes(np.asarray(v).tobytes())   # C order; a scalar keeps its [] dims
        index["inputs"][k] = {"file": f"inputs_{i}.bin", "dtype": v.dtype.name, "dims": list(v.shape)}
    (io_dir / "io.json").write_text(json.dumps(index, indent=1))
    return io_dir


def bench_model(name: str, a: argparse.Namespace, flags: list[str], model: Path | None = None,
                package_kwargs: dict | None = None, inputs: dict[str, np.ndarray] | None = None,
                node_args: list[str] | None = None) -> dict:
    """Package `model` (default: the registered model NAME) and run node_bench.mjs on it (on `inputs` if given,
    else on seeded random ones; `node_args`: more node_bench.mjs options)."""
    from packager import package
    from packager.errors import PackagerError
    model = model or model_file(name)
    bundle = BUNDLES_DIR / name
    t = time.perf_counter()
    try:
        # the static plan (batch 1) unless told otherwise: the figures in README and docs
        package(model, out=bundle, log=lambda s: print(f"[bench] {name}: {s}", file=sys.stderr),
                **{"dynamic": False, **(package_kwargs or {})})
    except PackagerError as e:
        return {"model": name, "error": f"packaging failed: {str(e).splitlines()[0]}"}
    print(f"[bench] {name}: packaged in {time.perf_counter() - t:.1f}s -> {bundle.relative_to(REPO)}", file=sys.stderr)
    io_dir = BUNDLES_DIR / f"{name}.io"
    report_file = BUNDLES_DIR / f"{name}.bench.json"
    cmd = ["node", *flags, str(BENCH / "node_bench.mjs"), str(model), str(bundle), "--seconds", str(a.seconds),
           "--rounds", str(a.rounds), "--slice", str(a.slice), "--variants", a.variants, "--json", str(report_file),
           "--save-io", str(io_dir), "--atol", str(a.atol), "--rtol", str(a.rtol)] + (["--no-native"] if a.native == "python" else []) \
        + (["--threads", str(a.threads)] if a.threads else []) \
        + (["--inputs", str(write_inputs(BUNDLES_DIR / f"{name}.in", inputs))] if inputs is not None else []) \
        + list(node_args or [])
    print("[bench] " + " ".join(cmd), file=sys.stderr)
    r = subprocess.run(cmd, cwd=BENCH)
    if r.returncode != 0:
        return {"model": name, "error": f"node_bench.mjs exited with {r.returncode}"}
    rep = json.loads(report_file.read_text())
    if "native" not in rep["runtimes"]:
        print(f"[bench] {name}: native onnxruntime from Python ({rep['skipped'].get('native', 'not measured in Node')})", file=sys.stderr)
        nat = python_native(model, io_dir, a.seconds, a.rounds, a.slice, a.atol, a.rtol)
        rep["runtimes"]["native"] = nat
        for ep in [k for k in rep["runtimes"] if k.startswith("edgepack-")]:
            rep["ratios"][f"{ep}/native"] = {"of_medians": rep["runtimes"][ep]["median_ms"] / nat["median_ms"]}
    return rep


def best_edgepack(rep: dict) -> str | None:
    eps = [k for k in rep.get("runtimes", {}) if k.startswith("edgepack-") and k != "edgepack-threads"]
    return min(eps, key=lambda k: rep["runtimes"][k]["median_ms"]) if eps else None


def table(reports: list[dict], mach: str) -> str:
    rows = ["| model | edgepack ms | ort-web ms | native ms | edgepack/ort-web | edgepack/native | CPU-time ratios ort-web, native | machine |",
            "|---|---|---|---|---|---|---|---|"]
    ms = lambda x: f"{x:.3f}" if x < 10 else f"{x:.2f}"  # noqa: E731
    for rep in reports:
        if "error" in rep:
            rows.append(f"| {rep['model']} | {rep['error']} | | | | | | {mach} |")
            continue
        rt, ep = rep["runtimes"], best_edgepack(rep)
        cell = lambda k: ms(rt[k]["median_ms"]) if k in rt else "n/a"  # noqa: E731
        ratio = lambda o: f"{rep['ratios'][f'{ep}/{o}']['of_medians']:.2f}" if f"{ep}/{o}" in rep["ratios"] else "n/a"  # noqa: E731
        native = cell("native") + (" (py)" if "native" in rt and "Python" in rt["native"].get("detail", "") else "")
        cpu = lambda o: f"{rep['ratios'][f'{ep}/{o}']['cpu_paired_median']:.2f}" if "cpu_paired_median" in rep["ratios"].get(f"{ep}/{o}", {}) else "n/a"  # noqa: E731
        rows.append(f"| {rep['model']} | {cell(ep)} ({ep.removeprefix('edgepack-')}) | {cell('ort-web')} | {native} | "
                    f"{ratio('ort-web')} | {ratio('native')} | {cpu('ort-web')}, {cpu('native')} | {mach} |")
    return "\n".join(rows)


def threads_table(reports: list[dict], threads: int, mach: str, extra: tuple[str, ...] = (),
                  cells: Callable[[dict], list[str]] = lambda rep: []) -> str:
    """The threaded build against our best 1-thread build and the others at `threads` threads; `extra` columns
    (headers) filled by `cells(report)`."""
    more = "".join(f" {h} |" for h in extra)
    rows = [f"| model | edgepack 1 thread ms | edgepack {threads} threads ms | speed-up | ort-web {threads} threads ms | "
            f"threads/ort-web | native {threads} threads ms | threads/native |{more} machine |",
            "|---|---|---|---|---|---|---|---|" + "---|" * len(extra) + "---|"]
    for rep in reports:
        rt, ra = rep.get("runtimes", {}), rep.get("ratios", {})
        if "error" in rep or "edgepack-threads" not in rt:
            rows.append(f"| {rep['model']} | {rep.get('error', 'no threaded run')} | | | | | | |" + " |" * len(extra) + f" {mach} |")
            continue
        one = best_edgepack(rep)
        f = lambda k: f"{rt[k]['median_ms']:.2f}" if k in rt else "n/a"  # noqa: E731
        r = lambda k: f"{ra[k]['paired_median']:.2f}" if k in ra else "n/a"  # noqa: E731
        rows.append(f"| {rep['model']} | {f(one)} ({one.removeprefix('edgepack-')}) | {f('edgepack-threads')} | "
                    f"{r(f'{one}/edgepack-threads')} | {f('ort-web')} | {r('edgepack-threads/ort-web')} | {f('native')} | "
                    f"{r('edgepack-threads/native')} |" + "".join(f" {c} |" for c in cells(rep)) + f" {mach} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"comma-separated (default {DEFAULT_MODELS}; 'tiny' is built in)")
    ap.add_argument("--out", default=str(BENCH / "results" / "latest.json"))
    ap.add_argument("--seconds", type=float, default=3.0, help="warm-up per runtime, seconds (default 3)")
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    ap.add_argument("--slice", type=float, default=0.5, help="seconds per runtime per round (default 0.5)")
    ap.add_argument("--variants", default="simd,relaxed", help="edgepack wasm variants (relaxed only where it validates)")
    ap.add_argument("--native", choices=["node", "python"], default="node",
                    help="native onnxruntime in the Node process (onnxruntime-node, interleaved; default) or from Python")
    ap.add_argument("--threads", type=int, default=0, help="also run edgepack-threads.wasm (and ort-web, native) with N threads")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-3)
    a = ap.parse_args(argv)
    if shutil.which("node") is None:
        raise SystemExit("node is not installed")
    if not (BENCH / "node_modules" / "onnxruntime-web").is_dir():
        raise SystemExit("bench/node_modules missing: run `npm install` in bench/ (or scripts/setup.sh)")
    flags = node_flags()
    mach = machine()
    reports = [bench_model(n.strip(), a, flags) for n in a.models.split(",") if n.strip()]
    md = threads_table(reports, a.threads, mach.replace("1 thread", f"{a.threads} threads")) if a.threads else table(reports, mach)
    print("\n" + md)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                               "commit": commit, "machine": mach, "node_flags": flags,
                               "settings": {k: getattr(a, k) for k in ("seconds", "rounds", "slice", "variants", "native", "atol", "rtol", "threads")},
                               "table": md, "models": reports}, indent=1) + "\n")
    print(f"\nwrote {out}")
    return 1 if any("error" in r for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
