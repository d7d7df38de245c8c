"""The `package` command.

    package [--target web] MODEL.onnx -o OUT/      package a model into a bundle (symbolic dims: run-time shapes)
    package run BUNDLE --input NAME=FILE.npy       run a bundle, print or save its outputs
    package inspect BUNDLE                          ops, tensors, arena and weight sizes
    package bench BUNDLE                            latency percentiles after a timed warm-up
    package keygen --out KEY                        Ed25519 key pair for --sign / --public-key
    package check MODEL.onnx [--target T]           what each target can run, without packaging
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from .errors import PackagerError

VERBS = ("run", "inspect", "bench", "keygen", "check")


def _dim_arg(d: str) -> int | tuple[int, int]:
    """'224' a fixed extent; '[1..512]' bounds; '[1..]' or '?' a run-time extent with no upper bound."""
    if d == "?":
        return (1, 0)
    if d.startswith("[") and d.endswith("]") and ".." in d:
        lo, _, hi = d[1:-1].partition("..")
        lo_i, hi_i = int(lo or 1), int(hi) if hi else 0
        if lo_i < 0 or (hi_i and hi_i < lo_i):
            raise ValueError(d)
        return (lo_i, hi_i)
    v = int(d)
    if v <= 0:
        raise ValueError(d)
    return v


def _shape_arg(s: str) -> tuple[str, tuple]:
    name, _, dims = s.rpartition("=")
    try:
        shape = tuple(_dim_arg(d) for d in dims.lower().split("x")) if dims else ()
    except ValueError:
        shape = ()
    if not name or not shape:
        raise argparse.ArgumentTypeError(f"expected NAME=1x3x224x224 (a dim may be bounds [1..512] or ?), got '{s}'")
    return name, shape


def _file_arg(s: str) -> tuple[str, str]:
    name, eq, path = s.partition("=")
    if not eq or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE.npy, got '{s}'")
    return name, path


def _load_npy(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except Exception as e:
        raise PackagerError(f"{path}: not a readable .npy file ({e})") from None


def cmd_package(argv: list[str]) -> int:
    from .api import package
    from .targets import TARGETS
    ap = argparse.ArgumentParser(prog="package", description="Package an ONNX model into a bundle for a target.",
                                 epilog="other verbs: package run|inspect|bench BUNDLE, package keygen --out KEY, "
                                        "package check MODEL (what each target can run, every node it cannot, "
                                        "without packaging) (see package VERB --help)")
    ap.add_argument("model", help="the .onnx file")
    ap.add_argument("--target", default="web", choices=TARGETS)
    ap.add_argument("-o", "--out", help="bundle directory (default: MODEL name + '.bundle')")
    ap.add_argument("--input-shape", action="append", type=_shape_arg, default=[], metavar="NAME=1x3x224x224",
                    help="shape of an input: each dim fixed (224: no per-run cost), bounded ([1..512]: resolved at run "
                         "time, the manifest states the most memory) or free (?); default: the model's symbolic dims "
                         "are resolved at run time (plan version 2) where the model allows it, else set to 1 with a "
                         "notice saying why")
    shapes = ap.add_mutually_exclusive_group()
    shapes.add_argument("--dynamic", action="store_true",
                        help="run-time shapes or an error: one bundle runs every shape the symbolic dims allow "
                             "(the default without the fallback to fixed shapes)")
    shapes.add_argument("--static", action="store_true",
                        help="a static plan: symbolic dims no --input-shape fixes are set to 1")
    ap.add_argument("--const", action="append", type=_file_arg, default=[], metavar="NAME=FILE.npy",
                    help="bind a graph input to a fixed value (it becomes a constant of the bundle)")
    ap.add_argument("--allow-domain", action="append", default=[], metavar="DOMAIN",
                    help="accept a model that uses ops of this custom domain (no code is ever loaded from a model)")
    ap.add_argument("--profile", default="default", choices=["default", "strict"],
                    help="strict: explicit attributes, static shapes, fixed order, exact memory bound, "
                         "determinism check, ops outside the profile refused (docs/strict-profile.md)")
    ap.add_argument("--sign", metavar="KEY.pem", help="sign the bundle with this Ed25519 private key "
                    "(make one with: package keygen)")
    ap.add_argument("--no-verify", action="store_true", help="skip the run against onnxruntime after packaging")
    ap.add_argument("--no-optimize", action="store_true",
                    help="ship and lower the graph as analyzed: no stripping, no optimizer passes (docs/optimizer.md)")
    ap.add_argument("--keep-metadata", action="store_true",
                    help="keep doc strings and metadata_props in model.onnx (with --emit-onnx)")
    ap.add_argument("--emit-onnx", action="store_true",
                    help="also ship the optimized graph as model.onnx (no runtime loads it; the folder doubles)")
    _quant_args(ap)
    a = ap.parse_args(argv)
    out = a.out or str(Path(a.model).with_suffix("")) + ".bundle"
    t0 = time.perf_counter()
    path = package(a.model, target=a.target, out=out, input_shapes=dict(a.input_shape),
                   dynamic=True if a.dynamic else False if a.static else None,
                   constants={n: _load_npy(p) for n, p in a.const}, verify=not a.no_verify, allow_domains=tuple(a.allow_domain), sign=a.sign,
                   profile=a.profile, optimize=not a.no_optimize, keep_metadata=a.keep_metadata, emit_onnx=a.emit_onnx,
                   log=lambda s: print(s, file=sys.stderr), **_quant_kwargs(a))
    m = json.loads((path / "manifest.json").read_text())
    p = m["plan"]
    arena = (f"arena {p['arena_bytes'] / 1024:.1f} KiB" if p.get("version", 1) == 1 else
             f"arena per input shape (at most {p['max_arena_bytes'] / 1024:.1f} KiB)" if p.get("max_arena_bytes")
             else "arena per input shape")
    print(f"{path}: {p['nodes']} kernels, {arena}, weights "
          f"{p['weights_bytes'] / 1024:.1f} KiB ({m.get('precision', {}).get('mode', 'none')}), "
          f"packaged in {time.perf_counter() - t0:.1f}s")
    return 0


def _floats(s: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in s.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got '{s}'") from None


def _size(s: str) -> tuple[int, int]:
    parts = s.lower().split("x")
    try:
        h, w = (int(parts[0]), int(parts[-1])) if len(parts) in (1, 2) else (0, 0)
    except ValueError:
        h = w = 0
    if h <= 0 or w <= 0:
        raise argparse.ArgumentTypeError(f"expected HxW (e.g. 224x224) or one number, got '{s}'")
    return h, w


def _quant_args(ap: argparse.ArgumentParser) -> None:
    from .quantize import CALIBRATION_METHODS, DEFAULT_BUDGET, MODES, PLACEMENTS
    q = ap.add_argument_group("precision (docs/quantization.md)")
    q.add_argument("--quantize", default="auto", choices=MODES,
                   help="auto (default): with --calibration int8 (int8-dynamic for MatMul models without Conv) if "
                        "it keeps --accuracy-budget, else fp16, else float32; without data float32; fp16: weights "
                        "stored as float16; int8: static, needs --calibration; "
                        "int8-dynamic: MatMul weights, no data needed")
    q.add_argument("--calibration", metavar="DATA", help=".npz keyed by input name (+ optional 'labels'), .npy "
                   "(single input), or a folder of them or of images; 80%% calibrates, 20%% is held out for the "
                   "accuracy report")
    q.add_argument("--evaluation", metavar="DATA", help="a separate set (same forms as --calibration, labels "
                   "inside the .npz) for the accuracy report and auto's budget; all --calibration samples calibrate")
    q.add_argument("--accuracy-budget", default=DEFAULT_BUDGET, metavar="top1=F,cosine=F",
                   help=f"what --quantize auto must keep against float32 on the evaluation samples (default "
                        f"{DEFAULT_BUDGET}: top-1 agreement where an output has one, mean cosine similarity)")
    q.add_argument("--calibration-method", default="minmax", choices=CALIBRATION_METHODS)
    q.add_argument("--qdq-placement", default="fusion-aware", choices=PLACEMENTS,
                   help="fusion-aware (default): activations stay next to their Conv/Gemm/MatMul; naive: "
                        "onnxruntime's placement (to measure the difference)")
    q.add_argument("--labels", metavar="FILE.npy", help="class ids of the calibration samples (accuracy of both models)")
    q.add_argument("--calibrate-fraction", type=float, default=0.8, metavar="F",
                   help="share of the samples used to calibrate; the rest is held out (default 0.8; 1 = no split)")
    q.add_argument("--image-size", type=_size, metavar="HxW", help="images: resize to (default: the input's size)")
    q.add_argument("--image-mean", type=_floats, default=(0.0,), metavar="M[,M,M]",
                   help="images: subtracted after scaling to [0, 1] (default 0)")
    q.add_argument("--image-std", type=_floats, default=(1.0,), metavar="S[,S,S]", help="images: divisor (default 1)")
    q.add_argument("--image-layout", default="nchw", choices=["nchw", "nhwc"])


def _quant_kwargs(a: argparse.Namespace) -> dict:
    from .quantize import ImageOptions
    return {"quantize": a.quantize, "calibration": a.calibration, "calibration_method": a.calibration_method,
            "qdq_placement": a.qdq_placement, "labels": a.labels, "calibrate_fraction": a.calibrate_fraction,
            "evaluation": a.evaluation, "accuracy_budget": a.accuracy_budget,
            "images": ImageOptions(size=a.image_size, mean=a.image_mean, std=a.image_std, layout=a.image_layout)}


def cmd_run(argv: list[str]) -> int:
    from .bundle import load_bundle
    ap = argparse.ArgumentParser(prog="package run", description="Run a bundle under wasmtime (the bundle's own wasm).")
    ap.add_argument("bundle")
    ap.add_argument("--input", action="append", type=_file_arg, default=[], metavar="NAME=FILE.npy")
    ap.add_argument("--output", action="append", type=_file_arg, default=[], metavar="NAME=FILE.npy",
                    help="save an output; without it outputs are printed")
    ap.add_argument("--variant", default="simd", choices=["simd", "scalar", "relaxed"])
    ap.add_argument("--public-key", metavar="HEX|FILE", help="require a valid signature by this Ed25519 key")
    a = ap.parse_args(argv)
    b = load_bundle(a.bundle, a.variant, public_key=a.public_key)
    outs = b.run({n: _load_npy(p) for n, p in a.input})
    saves = dict(a.output)
    unknown = [n for n in saves if n not in outs]
    if unknown:
        raise PackagerError(f"--output names unknown output(s) {', '.join(unknown)}; outputs: {', '.join(outs)}")
    for name, val in outs.items():
        if name in saves:
            np.save(saves[name], val)
            print(f"{name}: {val.dtype}{list(val.shape)} -> {saves[name]}")
        else:
            with np.printoptions(precision=5, suppress=True, threshold=64):
                print(f"{name}: {val.dtype}{list(val.shape)}\n{val}")
    return 0


def cmd_inspect(argv: list[str]) -> int:
    from .bundle import load_bundle
    from .plan import layout
    from .plan.opcodes import Op
    ap = argparse.ArgumentParser(prog="package inspect", description="Show what a bundle holds.")
    ap.add_argument("bundle")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    b = load_bundle(a.bundle)
    plan = layout.decode((b.path / "model.plan").read_bytes())
    ops = Counter(Op(n.op).name if n.op in Op._value2member_map_ else f"op{n.op}" for n in plan.nodes)
    info = {
        "name": b.manifest["name"], "target": b.manifest["target"],
        "inputs": b.inputs, "outputs": b.outputs,
        "kernels": dict(ops.most_common()), "nodes": len(plan.nodes), "tensors": len(plan.tensors),
        "arena_bytes": plan.arena_bytes, "intermediates_bytes": b.manifest["plan"]["intermediates_bytes"],
        "weights_bytes": len(plan.weights),
        "files": {k: v["bytes"] for k, v in b.manifest["files"].items()},
        "verification": b.manifest.get("verification"),
        "optimizations": b.manifest.get("optimizations"), "stripped": b.manifest.get("stripped"),
        "precision": b.manifest.get("precision", {}).get("mode", "none"),
        "accuracy": b.manifest.get("accuracy"),
    }
    if a.json:
        print(json.dumps(info, indent=2))
        return 0
    kib = lambda n: f"{n / 1024:,.1f} KiB"  # noqa: E731
    print(f"bundle   {b.path}  ({info['name']}, target {info['target']})")
    for kind in ("inputs", "outputs"):
        for s in info[kind]:
            print(f"{kind[:-1]:<8} {s['name']}: {s['dtype']}{s['shape']}")
    print(f"plan     {info['nodes']} kernel nodes, {info['tensors']} tensors")
    print("kernels  " + ", ".join(f"{k} x{v}" for k, v in info["kernels"].items()))
    saved = 1 - info["arena_bytes"] / info["intermediates_bytes"] if info["intermediates_bytes"] else 0
    if plan.dynamic is not None:   # version 2: planned by the core for each input shape
        most = plan.dynamic.max_arena_bytes
        print(f"arena    planned per input shape{f', at most {kib(most)}' if most else ''} "
              f"(all intermediates at the example shape: {kib(info['intermediates_bytes'])})")
        for sym, d in b.manifest.get("dims", {}).items():
            print(f"dim      {sym}: {d.get('min')}..{d.get('max') or ''} (example {d.get('example')})")
    else:
        print(f"arena    {kib(info['arena_bytes'])} (all intermediates: {kib(info['intermediates_bytes'])}, "
              f"{saved:.0%} saved by lifetime reuse)")
    print(f"weights  {kib(info['weights_bytes'])}")
    for f, n in info["files"].items():
        print(f"file     {f:<24} {kib(n)}")
    if info["verification"]:
        print(f"verified {json.dumps(info['verification'])}")
    if info["optimizations"] is None:
        print("optimize not run (--no-optimize)")
    else:
        from .optimizer import summary
        report = info["optimizations"]
        print(f"optimize {report[0]['nodes_before']} -> {report[-1]['nodes_after']} ONNX nodes")
        for line in summary(report, info["stripped"]):
            print(f"  {line}")
    print(f"precision {info['precision']}")
    if info["accuracy"]:
        from .quantize.report import summary_line
        print(summary_line(info["accuracy"]))
    return 0


def cmd_bench(argv: list[str]) -> int:
    from .reference import random_inputs
    from .bundle import load_bundle, set_inputs
    ap = argparse.ArgumentParser(prog="package bench",
                                 description="Latency of a bundle under wasmtime: warm-up by time, then percentiles.")
    ap.add_argument("bundle")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds of warm-up (default 3)")
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds of measurement (default 10)")
    ap.add_argument("--variant", default="simd", choices=["simd", "scalar", "relaxed"])
    ap.add_argument("--profile", action="store_true", help="also print the time per kernel node (slowest first)")
    a = ap.parse_args(argv)
    b = load_bundle(a.bundle, a.variant)
    ranges = {k: tuple(v) for k, v in (b.manifest.get("verification", {}).get("input_ranges") or {}).items()}
    feeds = b.check_feeds(random_inputs(b.example_inputs(), ranges=ranges))   # the ranges verification used
    s = b.session()
    set_inputs(s, b.inputs, feeds)   # value inputs' random values may give no valid shape: an InputError naming them

    def write_inputs() -> None:   # every run: the arena may reuse an input's bytes once it is consumed
        for spec in b.inputs:
            s.write(spec["tensor"], feeds[spec["name"]])

    end = time.perf_counter() + a.warmup
    while time.perf_counter() < end:
        write_inputs()
        s.run()
    times = []
    end = time.perf_counter() + a.seconds
    while time.perf_counter() < end or len(times) < 5:
        t = time.perf_counter()
        write_inputs()
        s.run()
        times.append((time.perf_counter() - t) * 1e3)
    p50, p95, p99 = np.percentile(times, [50, 95, 99])
    if a.profile:
        _print_profile(b, s, write_inputs)
    print(f"{b.path.name} [{a.variant}, wasmtime, 1 thread]: p50 {p50:.3f} ms  p95 {p95:.3f} ms  p99 {p99:.3f} ms  "
          f"({len(times)} runs)")
    return 0


def node_times_ms(b, session, write_inputs, runs: int = 20):
    """(the bundle's plan, median ms per plan node over `runs` profiled runs): `package bench --profile`, bench/zoo.py."""
    from .plan import layout
    plan = layout.decode((b.path / "model.plan").read_bytes())
    profiles = []
    for _ in range(runs):
        write_inputs()
        profiles.append(session.profile())
    return plan, np.median(np.array(profiles), axis=0) * 1e3


def _print_profile(b, session, write_inputs, runs: int = 20) -> None:
    from .plan.opcodes import Op
    plan, per = node_times_ms(b, session, write_inputs, runs)
    total = per.sum()
    print(f"{'node':>5} {'kernel':<16} {'ms':>8} {'share':>6}  output shape")
    for i in np.argsort(-per)[:25]:
        n = plan.nodes[i]
        shape = plan.tensors[n.outputs[0]].dims if n.outputs else ()
        print(f"{i:>5} {Op(n.op).name:<16} {per[i]:>8.3f} {per[i] / total:>6.1%}  {list(shape)}")
    by_kernel: dict[str, float] = {}
    for n, t in zip(plan.nodes, per):
        by_kernel[Op(n.op).name] = by_kernel.get(Op(n.op).name, 0.0) + t
    print("per kernel: " + ", ".join(f"{k} {v:.2f} ms" for k, v in sorted(by_kernel.items(), key=lambda kv: -kv[1])))


def cmd_keygen(argv: list[str]) -> int:
    from .signing import generate_keypair
    ap = argparse.ArgumentParser(prog="package keygen", description="Make an Ed25519 key pair for signing bundles.")
    ap.add_argument("--out", default="edgepack-key", help="writes OUT.pem (private) and OUT.pub (public, hex)")
    a = ap.parse_args(argv)
    generate_keypair(Path(a.out + ".pem"), Path(a.out + ".pub"))
    print(f"private key: {a.out}.pem (keep it secret)\npublic key:  {a.out}.pub")
    return 0


def cmd_check(argv: list[str]) -> int:
    from .targets import TARGETS
    from .check import check_model, format_report
    ap = argparse.ArgumentParser(prog="package check",
                                 description="Without packaging: what each target can run, every node it cannot with "
                                             "the reason (grouped by op), and the model's symbolic dimensions. Exit "
                                             "status 0 only when the model packages for every target checked.")
    ap.add_argument("model", help="the .onnx file")
    ap.add_argument("--target", action="append", choices=TARGETS, default=[],
                    help="check this target (repeatable; default: all of them)")
    ap.add_argument("--input-shape", action="append", type=_shape_arg, default=[], metavar="NAME=1x3x224x224")
    ap.add_argument("--dynamic", action="store_true", help="check the run-time-shape plan (as package --dynamic)")
    ap.add_argument("--const", action="append", type=_file_arg, default=[], metavar="NAME=FILE.npy")
    ap.add_argument("--allow-domain", action="append", default=[], metavar="DOMAIN")
    ap.add_argument("--no-optimize", action="store_true")
    a = ap.parse_args(argv)
    report = check_model(a.model, tuple(a.target) or TARGETS, dict(a.input_shape),
                         {n: _load_npy(p) for n, p in a.const}, tuple(a.allow_domain), a.dynamic, not a.no_optimize)
    print(format_report(report))
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verb = argv[0] if argv and argv[0] in VERBS else None
    try:
        commands = {"run": cmd_run, "inspect": cmd_inspect, "bench": cmd_bench, "keygen": cmd_keygen,
                    "check": cmd_check}
        try:
            return commands[verb](argv[1:]) if verb else cmd_package(argv)
        finally:
            sys.stdout.flush()   # here (also after --help), where a closed pipe is caught, not at exit
    except PackagerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:   # `package inspect B | head`: the reader left; stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # so the exit-time flush cannot fail
        return 141   # 128 + SIGPIPE, as a command killed by the signal


if __name__ == "__main__":
    sys.exit(main())
