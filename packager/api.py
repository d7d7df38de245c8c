"""The packaging pipeline: load -> analyze (bind, fold, shapes) -> lower to a plan -> write bundle -> verify."""
from __future__ import annotations

import datetime
import os
import tempfile
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np
import onnx

from . import __version__, weights
from .analyze import analyze
from .bundle import FORMAT, FORMAT_VERSION, WASM_VARIANTS, check_output, load_bundle, stage_bundle, dtype_name
from .errors import PackagerError
from .lower import lower
from .model_load import load_model
from .plan.opcodes import Op
from .profile import check_strict_ops, explicit_attributes
from .reference import compare, random_inputs, reference_run
from .quantize import DEFAULT_BUDGET, ImageOptions, QuantResult, parse_budget, quantize_step
from .plan import layout
from .toolchain import ensure_wasm

TARGETS = ("web", "pi5", "android")
PROFILES = ("default", "strict")


@weights.scoped   # large weights are held once, in packager/weights.py, for the run
def package(model: str | os.PathLike | onnx.ModelProto, target: str = "web", out: str | os.PathLike = "out",
            input_shapes: dict[str, tuple[int, ...]] | None = None,
            constants: dict[str, np.ndarray] | None = None, verify: bool = True,
            allow_domains: tuple[str, ...] = (), sign: str | os.PathLike | None = None, profile: str = "default",
            log: Callable[[str], None] = lambda s: None, optimize: bool = True, keep_metadata: bool = False,
            quantize: str = "auto", calibration: str | os.PathLike | dict | None = None,
            calibration_method: str = "minmax", qdq_placement: str = "fusion-aware",
            labels: str | os.PathLike | np.ndarray | None = None, images: "ImageOptions | None" = None,
            calibrate_fraction: float = 0.8, dynamic: bool | None = None,
            evaluation: str | os.PathLike | dict | None = None, accuracy_budget: str = DEFAULT_BUDGET) -> Path:
    """Package an ONNX model for `target`; returns the bundle directory. See `package --help`.
    quantize: none | fp16 | int8 | int8-dynamic | auto; calibration, evaluation: DATA; accuracy_budget: what
    auto must keep, e.g. 'top1=0.99,cosine=0.999' (docs/quantization.md).
    input_shapes: per input, a dim is an int (fixed) or a (min, max) pair (resolved at run time within bounds;
    max 0 = unbounded). dynamic: None (default) resolves the symbolic dims no input_shapes fixes at run time (a
    version-2 plan) where the model allows it, else fixes them to 1 with one notice saying why; True: run-time
    shapes or an error; False: a static plan (symbolic dims fixed to 1 where not given)."""
    if target not in TARGETS:
        raise PackagerError(f"unknown target '{target}' (available: {', '.join(TARGETS)})")
    name = Path(model).stem if not isinstance(model, onnx.ModelProto) else (model.graph.name or "model")
    if profile not in PROFILES:
        raise PackagerError(f"unknown profile '{profile}' (available: {', '.join(PROFILES)})")
    strict = profile == "strict"
    parse_budget(accuracy_budget)   # a bad budget is an error on every path, before any work
    out = check_output(out)   # before any work: never replace a file or a folder that is not a bundle
    m = load_model(model, frozenset(allow_domains))
    from .optimizer import canonicalize   # contrib ops, function-bodied ops -> standard ONNX, before analysis
    source, (m, rewritten) = m, canonicalize(m)
    for n in rewritten:
        log(f"notice: {n}")
    ort_source = None   # verification runs onnxruntime on the contrib / function ops themselves
    if rewritten:
        from .passes.contrib import for_onnxruntime
        ort_source = for_onnxruntime(source)
    syms = _run_time_symbols(m, strict, input_shapes, constants, dynamic, quantize, calibration, labels, evaluation)
    stages = _Stages(m, constants, strict, optimize, keep_metadata, log)
    fallback = None   # why a model with symbolic dims got fixed shapes (the default only; one notice)
    if syms is not None and not isinstance(syms, str):
        try:
            graph, reference, optimization, lowered, io_dims = _lower_dynamic(stages, syms, quiet=dynamic is None)
        except Exception as e:   # noqa: BLE001 - the default must not fail where the static plan works
            if dynamic or _bounded(input_shapes):   # asked for: run-time shapes or a clear error
                raise
            fallback, syms = _reason(e), None
    elif isinstance(syms, str):
        fallback, syms = syms, None
    if syms is not None:
        quant = quantize_step(graph, target, "none", None, None, None, calibration_method, qdq_placement,
                              calibrate_fraction, strict, log)
        float_model = shipped = _run_time_io(graph.model, io_dims)
        reference = stages.source_model(ort_source)
    else:
        shapes = input_shapes
        if fallback is not None:   # the symbolic dims set to 1 here, so the notice is one line, not one per dim
            shapes, fixed = _ones(m, input_shapes, constants)
            notice = (f"run-time shapes not possible: {fallback}; packaged with fixed shapes instead, {fixed}, "
                      f"or --static for fixed shapes without this notice)")
        if _bounded(shapes):   # bounds only on dims the model fixes: nothing is left to resolve at run time
            raise PackagerError("--input-shape bounds [min..max] name only dims the model fixes: give their sizes")
        graph, reference, optimization = stages.front(shapes)
        if ort_source is not None:
            reference = stages.source_model(ort_source)
        if fallback is not None:
            graph.notices.append(notice)
        # -- precision (packager/quantize): resolve --quantize, calibrate, rewrite the graph; before lowering --
        float_model = reference   # the accuracy report compares with the float32 model before any rewrite
        quant = quantize_step(graph, target, quantize, calibration, labels, images, calibration_method, qdq_placement,
                              calibrate_fraction, strict, log, evaluation, accuracy_budget)
        graph, shipped = quant.graph, quant.shipped_model()
        if quant.mode != "none":   # a changed precision: verify the bundle against the graph it ships
            reference = shipped
        lowered = lower(graph, weights_fp16=quant.weights_fp16)
        if fallback is not None:   # said once the static plan exists (a model neither plan takes gets the error only)
            log(f"notice: {notice}")
        io_dims = None
        if lowered.plan.version != layout.VERSION and target != "web":   # If/Loop/Scan: a version-2 plan
            raise PackagerError(f"If/Loop/Scan: web bundles only so far (their version-2 plans are not verified on the "
                                f"{target} runtime yet): package for --target web")
    runtime = ensure_wasm()

    def dims(n: str, t: int) -> list:
        # a dim of -1 in a plan of fixed inputs: an If output whose branch sets it when it runs
        return io_dims[n] if io_dims else [d if d >= 0 else f"{n}_dim{k}" for k, d in enumerate(lowered.plan.tensors[t].dims)]

    def io(names: list[str], plan_ids: list[int]) -> list[dict]:
        return [{"name": n, "dtype": dtype_name(lowered.plan.tensors[t].dtype), "shape": dims(n, t), "tensor": t}
                for n, t in zip(names, plan_ids)]

    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "target": target,
        "name": name, "created_by": f"edgepack {__version__}",
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "source": {"opset": graph.opset, "producer": f"{m.producer_name} {m.producer_version}".strip(),
                   "nodes": len(source.graph.node)},
        "inputs": io(graph.inputs, lowered.plan.inputs),
        "outputs": io(graph.outputs, lowered.plan.outputs),
        "plan": {"version": lowered.plan.version, "nodes": len(lowered.plan.nodes), "tensors": len(lowered.plan.tensors),
                 "arena_bytes": lowered.plan.arena_bytes, "intermediates_bytes": lowered.intermediates_bytes,
                 "weights_bytes": len(lowered.plan.weights), "folded_nodes": graph.folded},
        "runtime": {v: f for v, f in WASM_VARIANTS.items()},
        "notices": rewritten + graph.notices,
        "profile": {"name": profile},
        "precision": quant.info,
    }
    if optimization is not None:
        manifest.update(optimizations=optimization.report, stripped=optimization.stripped)
    if syms is not None:   # docs/plan-format.md, "Version 2"
        manifest["dims"] = {s: {"min": syms.lo(s), "max": syms.hi(s), "example": syms.example[s]} for s in syms.names()}
        # resolving can fail at a node (an input shape the model does not allow): runtimes name its ONNX node
        manifest["plan"]["node_sources"] = [f"{Op(n.op).name} ({src})" for n, src in
                                            zip(lowered.plan.nodes, lowered.node_sources)]
        if lowered.plan.dynamic.max_arena_bytes:
            manifest["plan"].update(max_arena_bytes=lowered.plan.dynamic.max_arena_bytes,
                                    max_memory_bytes=lowered.report["max_memory_bytes"])
    if strict:
        manifest["profile"]["execution_order"] = [
            {"kernel": Op(n.op).name, "onnx_node": src} for n, src in zip(lowered.plan.nodes, lowered.node_sources)]
    if target != "web":  # edge targets: aarch64 runtime files + consistency report (packager/targets/edge.py)
        from .targets.edge import stage_edge_bundle
        with tempfile.TemporaryDirectory(prefix="edgepack-plan-") as tmp:   # the plan is never one bytes object
            layout.write(lowered.plan, Path(tmp) / "model.plan")
            staged = stage_edge_bundle(target, out, manifest, shipped, Path(tmp) / "model.plan",
                                       verify=verify or strict, log=log, reference=reference)
    else:
        # written streaming into the bundle: a 1-2 GB model's weights are never joined in memory
        files: dict = {"model.onnx": partial(weights.write_model, shipped), "model.plan": partial(layout.write, lowered.plan)}
        files.update({f: runtime[f] for f in WASM_VARIANTS.values()})
        from .targets.web_npm import npm_files   # the bundle is an npm package too (package.json, index.js, .d.ts)
        files.update(npm_files(manifest, files, signed=sign is not None))
        staged = stage_bundle(out, manifest, files)
    with staged:   # verify, report and sign in the staging folder; an earlier bundle stays until commit
        if target == "web" and (verify or strict):
            _verify(staged.path, reference, log, strict)
        _accuracy(staged.path, target, float_model, quant, log)
        if sign is not None:   # last: the signature covers the final manifest
            from .signing import sign_bundle
            sign_bundle(staged.path, Path(sign))
        return staged.commit()


def _accuracy(path: Path, target: str, float_model: onnx.ModelProto, quant: "QuantResult",
              log: Callable[[str], None]) -> None:
    """The bundle, run by its runtime, against the float32 model: manifest 'accuracy' + accuracy.md."""
    if quant.evaluate is None:
        return
    from .quantize import report
    rep = report.accuracy_report(path, target, float_model, quant.evaluate, quant.mode, quant.eval_note)
    report.attach(path, rep, quant.info)
    log(report.summary_line(rep))


def _verify(path: Path, model: onnx.ModelProto, log: Callable[[str], None], strict: bool = False) -> None:
    """Run the bundle (SIMD build) and onnxruntime on the same seeded inputs; record the difference.
    Strict: also run it again and require identical bits, and record the exact memory bound. A version-2
    bundle runs at its example shape (manifest "dims")."""
    import json
    b = load_bundle(path)
    feeds = random_inputs(b.example_inputs())
    got = b.run(feeds)
    profile_facts = {}
    if strict:
        again = b.run(feeds)
        if any(got[k].tobytes() != again[k].tobytes() for k in got):
            raise PackagerError("--profile strict: two runs on the same input gave different bits")
        profile_facts = {"deterministic": "two runs on the same input gave identical bits",
                         "memory_bound_bytes": b.session().memory_bound,
                         "memory_bound_note": "highest byte of wasm linear memory used: runtime image + plan + arena"}
    try:
        want = reference_run(model, feeds, isolated=True)
        result = dict(compare(got, want), reference="onnxruntime CPU", inputs="seeded random (seed 0)")
    except PackagerError:
        raise
    except Exception as e:  # onnxruntime itself cannot run this model
        result = {"reference": "unavailable", "reason": str(e).splitlines()[0][:200]}
    manifest = json.loads((path / "manifest.json").read_text())
    if b.manifest.get("dims"):
        result["input_shapes"] = {k: list(v.shape) for k, v in feeds.items()}
    manifest["verification"] = result
    manifest["profile"].update(profile_facts)
    (path / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    if "max_abs_diff" in result:
        log(f"verified against onnxruntime: max abs diff {result['max_abs_diff']:.3g}")


class _Stages:
    """The front of the pipeline for one set of input shapes: analyze (bind, fold, infer) then optimize."""

    def __init__(self, m: onnx.ModelProto, constants, strict: bool, optimize: bool, keep_metadata: bool,
                 log: Callable[[str], None]) -> None:
        self.m, self.constants, self.strict, self.optimize, self.keep_metadata, self.log = \
            m, constants, strict, optimize, keep_metadata, log

    def front(self, input_shapes, keep: frozenset[str] | None = None, quiet: bool = False):
        """(graph, reference model, optimization or None). keep: a probe of run-time shapes (packager/dynamic.py)."""
        graph = analyze(self.m, input_shapes, self.constants, strict=self.strict, keep=keep or frozenset(),
                        dynamic=keep is not None)
        if not quiet:
            for n in graph.notices:
                self.log(f"notice: {n}")
        if self.strict:
            check_strict_ops(graph.nodes, graph.opset)
            explicit_attributes(graph.model, graph.shapes, graph.opset)
        reference, optimization = graph.model, None   # verification compares with the graph before optimization
        if self.optimize:
            from .optimizer import optimize as run_optimizer, summary
            optimization = run_optimizer(graph, len(self.m.graph.node), self.keep_metadata)
            graph, reference = optimization.graph, optimization.reference
            if not quiet:
                for line in summary(optimization.report, optimization.stripped):
                    self.log(f"optimize: {line}")
        return graph, reference, optimization

    def source_model(self, model: onnx.ModelProto | None = None) -> onnx.ModelProto:
        """The loaded model with --const inputs as initializers: onnxruntime runs it at any input shape."""
        from onnx import numpy_helper
        m = onnx.ModelProto()
        m.CopyFrom(model if model is not None else self.m)
        for name, value in (self.constants or {}).items():
            m.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
        keep = [vi for vi in m.graph.input if vi.name not in (self.constants or {})]
        del m.graph.input[:]
        m.graph.input.extend(keep)
        return m


def _bounded(input_shapes: dict | None) -> bool:
    """Bounds ([min..max] or ?) in input_shapes: they ask for run-time shapes."""
    return any(not isinstance(d, (int, np.integer)) for s in (input_shapes or {}).values() for d in s)


def _run_time_symbols(m: onnx.ModelProto, strict: bool, input_shapes: dict | None, constants: dict | None,
                      dynamic: bool | None, quantize: str, calibration, labels, evaluation=None):
    """The symbolic input dims to resolve at run time (packager/dynamic.Symbols); None: a static plan (no symbolic
    dims left, or asked for); a str: why the default cannot give run-time shapes (the caller falls back)."""
    asked = dynamic is True or _bounded(input_shapes)
    if dynamic is False:
        if _bounded(input_shapes):
            raise PackagerError("--input-shape bounds [min..max] resolve dims at run time: not with --static "
                                "(give fixed sizes)")
        return None
    if strict:   # analyze refuses symbolic dims under strict itself, naming the input
        if asked:
            raise PackagerError("--profile strict needs fixed shapes: give them with --input-shape (no bounds, "
                                "no --dynamic)")
        return None
    from .dynamic import find_symbols
    syms = find_symbols(m, input_shapes, constants)
    if not syms.any:
        return None
    # the version-2 path ships float32 and verifies at one shape: calibration data has no place there yet
    why = f"--quantize {quantize}" if quantize not in ("auto", "none") else \
        "--calibration" if calibration is not None else "--labels" if labels is not None else \
        "--evaluation" if evaluation is not None else None
    if why is not None:
        if asked:
            raise PackagerError(f"{why} needs fixed shapes so far: give them with --input-shape")
        return f"{why} needs fixed shapes so far"
    return syms


def _reason(e: Exception) -> str:
    """The first line of a version-2 refusal without its advice to give fixed shapes (the notice says how); an
    unexpected exception (a bug of the version-2 lowering) by its type, so it is reported, not hidden."""
    import re
    line = (str(e).splitlines() or [""])[0]
    if not isinstance(e, PackagerError):
        return f"the version-2 lowering failed ({type(e).__name__}: {line[:200]})"
    return re.sub(r"[:;,]?\s*\(?(give (this model )?fixed shapes|give them)[^)]*\)?\s*$", "", line) or line


def _ones(m: onnx.ModelProto, input_shapes: dict | None, constants: dict | None) -> tuple[dict, str]:
    """input_shapes with every symbolic dim it leaves set to 1, and the notice's words for them (what was set, and
    an --input-shape to copy)."""
    from .dynamic import find_symbols
    syms = find_symbols(m, input_shapes, constants)
    shapes = dict(input_shapes or {})
    said, args = [], []
    for name, dims in syms.dims.items():
        if any(dims):
            shapes[name] = tuple(1 if s else d for s, d in zip(dims, syms.fixed[name]))
            said.append(f"{name}[{', '.join(s or str(d) for s, d in zip(dims, syms.fixed[name]))}]")
            args.append(f"--input-shape {name}={'x'.join(map(str, shapes[name]))}")
    return shapes, f"symbolic dims set to 1: {'; '.join(said)} (choose with {' '.join(args)}"


def _run_time_io(model: onnx.ModelProto, io_dims: dict[str, list]) -> onnx.ModelProto:
    """The model.onnx a version-2 bundle ships: the graph was analyzed at a probe shape, so its inputs and outputs
    get the manifest's run-time dims back (a dim no symbol names becomes unknown) and the probe's inferred shapes
    go: onnxruntime then runs it at every shape the bundle runs."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in [*m.graph.input, *m.graph.output]:
        for d, want in zip(vi.type.tensor_type.shape.dim, io_dims.get(vi.name, [])):
            if not isinstance(want, int):
                d.Clear()
                if want:
                    d.dim_param = want
    del m.graph.value_info[:]
    return m


def _lower_dynamic(stages: _Stages, syms, quiet: bool = False):
    """A version-2 plan (packager/dynamic.py): probe at two shapes, keep what varies as shape arithmetic,
    lower at both, check they agree, assemble. Returns (graph, reference, optimization, lowered, io dims).
    quiet: hold the log lines until it succeeds (the default falls back to fixed shapes on failure: its lines
    would be said twice)."""
    if quiet:
        held: list[str] = []
        log, stages.log = stages.log, held.append
        try:
            out = _lower_dynamic(stages, syms)
        finally:
            stages.log = log
        for line in held:
            log(line)
        return out
    from .dynamic import bounded_memory, compare_lowerings, varying_axes, varying_values
    from .lower import lower_ctx
    from .plan.dynamic import assemble_dynamic
    shapes_a, shapes_b = syms.shapes(syms.probe_a), syms.shapes(syms.probe_b)
    keep = varying_values(analyze(stages.m, shapes_a, stages.constants).consts,
                          analyze(stages.m, shapes_b, stages.constants).consts)
    graph_a, reference, optimization = stages.front(shapes_a, keep)
    graph_b, _, _ = stages.front(shapes_b, keep, quiet=True)
    axes = varying_axes(graph_a.shapes, graph_b.shapes)
    ctx_a, ins, outs = lower_ctx(graph_a, dynamic_axes=axes)
    ctx_b, _, _ = lower_ctx(graph_b, dynamic_axes=axes)
    varying = compare_lowerings(ctx_a, ctx_b)
    bounds = {n: [b if b else (1, 0) for b in bs] for n, bs in syms.bounds.items()}
    lowered = assemble_dynamic(ctx_a, ins, outs, varying, bounds)
    wasm = ensure_wasm()["edgepack.wasm"]
    bound = bounded_memory(lowered.plan, syms, wasm)
    if bound is None:   # the core resolves the plan at the example shape (a kernel without a shape function fails here)
        from .runtime.wasm import WasmPlan
        WasmPlan(wasm, layout.encode(lowered.plan)).set_shapes(
            [syms.shapes(syms.example)[n] for n in syms.dims])
    if bound is not None:   # the plan promises this arena at most; the manifest states it with the rest of memory
        lowered.plan.dynamic.max_arena_bytes = bound[0]
        lowered.report["max_memory_bytes"] = bound[1]
    io_dims = {n: [s or d for s, d in zip(syms.dims[n], syms.fixed[n])] for n in graph_a.inputs}
    for n, t in zip(graph_a.outputs, outs):
        sa, sb = ctx_a.tensors[t].shape, ctx_b.tensors[t].shape
        io_dims[n] = [x if x == y else syms.symbol_for(x, y) for x, y in zip(sa, sb)]
    return graph_a, reference, optimization, lowered, io_dims
