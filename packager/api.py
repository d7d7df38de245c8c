"""The packaging pipeline, one call per stage: load -> analyze + optimize -> quantize -> lower -> write -> verify
-> sign. Each stage is a module with one entry point; each target (web, pi5, android) one implementation of
packager/targets/base.Target, the only way this file knows a target."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np
import onnx

from . import weights
from .bundle import check_output
from .errors import PackagerError
from .front import Front
from .lower import lower
from .manifest import build_manifest
from .model_load import load_model
from .passes.contrib import for_onnxruntime
from .plan import layout
from .plan.opcodes import Op
from .quantize import DEFAULT_BUDGET, ImageOptions, parse_budget, quantize_step
from .quantize.report import report_accuracy
from .run_time_shapes import bounded, lower_run_time, ones, reason, run_time_symbols, run_time_io
from .targets import TARGETS, get_target

__all__ = ["package", "TARGETS", "PROFILES"]
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
            evaluation: str | os.PathLike | dict | None = None, accuracy_budget: str = DEFAULT_BUDGET,
            emit_onnx: bool = False) -> Path:
    """Package an ONNX model for `target`; returns the bundle directory. See `package --help`.
    quantize: none | fp16 | int8 | int8-dynamic | auto; calibration, evaluation: DATA; accuracy_budget: what
    auto must keep, e.g. 'top1=0.99,cosine=0.999' (docs/quantization.md).
    input_shapes: per input, a dim is an int (fixed) or a (min, max) pair (resolved at run time within bounds;
    max 0 = unbounded). dynamic: None (default) resolves the symbolic dims no input_shapes fixes at run time (a
    version-2 plan) where the model allows it, else fixes them to 1 with one notice saying why; True: run-time
    shapes or an error; False: a static plan (symbolic dims fixed to 1 where not given).
    emit_onnx: also ship the optimized graph as model.onnx (no runtime loads it; it doubles the folder's size)."""
    tgt = get_target(target)
    if profile not in PROFILES:
        raise PackagerError(f"unknown profile '{profile}' (available: {', '.join(PROFILES)})")
    strict = profile == "strict"
    parse_budget(accuracy_budget)   # a bad budget is an error on every path, before any work
    out = check_output(out)   # before any work: never replace a file or a folder that is not a bundle
    name = Path(model).stem if not isinstance(model, onnx.ModelProto) else (model.graph.name or "model")
    # -- load (packager/model_load.py), contrib / function-bodied ops -> standard ONNX (packager/optimizer.py) --
    source = load_model(model, frozenset(allow_domains))
    from .optimizer import canonicalize   # lazily, as every use of optimizer.py: onnx_ir imports sympy (~1 s)
    m, rewritten = canonicalize(source)
    for n in rewritten:
        log(f"notice: {n}")
    ort_source = for_onnxruntime(source) if rewritten else None   # onnxruntime runs the contrib ops themselves
    # -- analyze + optimize (packager/front.py) and lower (packager/lower.py); shapes resolved at run time where the
    # model has symbolic dims and allows it (packager/run_time_shapes.py), else fixed --
    front = Front(m, constants, strict, optimize, keep_metadata, log)
    syms = run_time_symbols(m, strict, input_shapes, constants, dynamic, quantize, calibration, labels, evaluation)
    fallback = None   # why a model with symbolic dims got fixed shapes (the default only; one notice)
    if syms is not None and not isinstance(syms, str):
        try:
            graph, reference, optimization, lowered, io_dims = lower_run_time(front, syms, quiet=dynamic is None)
        except Exception as e:   # noqa: BLE001 - the default must not fail where the static plan works
            if dynamic or bounded(input_shapes):   # asked for: run-time shapes or a clear error
                raise
            fallback, syms = reason(e), None
    elif isinstance(syms, str):
        fallback, syms = syms, None
    if syms is not None:   # the version-2 path ships float32
        quant = quantize_step(graph, tgt.name, "none", None, None, None, calibration_method, qdq_placement,
                              calibrate_fraction, strict, log)
        float_model = shipped = run_time_io(graph.model, io_dims)
        reference = front.source_model(ort_source)
    else:
        shapes = input_shapes
        if fallback is not None:   # the symbolic dims set to 1 here, so the notice is one line, not one per dim
            shapes, fixed = ones(m, input_shapes, constants)
            notice = (f"run-time shapes not possible: {fallback}; packaged with fixed shapes instead, {fixed}, "
                      f"or --static for fixed shapes without this notice)")
        if bounded(shapes):   # bounds only on dims the model fixes: nothing is left to resolve at run time
            raise PackagerError("--input-shape bounds [min..max] name only dims the model fixes: give their sizes")
        graph, reference, optimization = front.run(shapes)
        if ort_source is not None:
            reference = front.source_model(ort_source)
        if fallback is not None:
            graph.notices.append(notice)
        # -- quantize (packager/quantize): resolve --quantize, calibrate, rewrite the graph; before lowering --
        float_model = reference   # the accuracy report compares with the float32 model before any rewrite
        quant = quantize_step(graph, tgt.name, quantize, calibration, labels, images, calibration_method, qdq_placement,
                              calibrate_fraction, strict, log, evaluation, accuracy_budget)
        graph, shipped = quant.graph, quant.shipped_model()
        if quant.mode != "none":   # a changed precision: verify the bundle against the graph it ships
            reference = shipped
        lowered = lower(graph, weights_fp16=quant.weights_fp16)
        if fallback is not None:   # said once the static plan exists (a model neither plan takes gets the error only)
            log(f"notice: {notice}")
        io_dims = None
        tgt.check(control_flow=any(n.op in (Op.IF, Op.LOOP, Op.SCAN) for n in lowered.plan.nodes))
    # -- write (packager/manifest.py, the target's files), verify, report accuracy, sign: in the staging folder, so
    # an earlier bundle stays until commit --
    manifest = build_manifest(name, tgt.name, source, graph, lowered, rewritten + graph.notices, profile, quant.info,
                              optimization, syms, io_dims)
    with tempfile.TemporaryDirectory(prefix="edgepack-plan-") as tmp:   # the plan is never one bytes object
        plan = Path(tmp) / "model.plan"
        layout.write(lowered.plan, plan)
        del lowered   # the plan's weights (views, or copies a lowering made: transposed, packed) are on disk now
        with tgt.stage(out, manifest, shipped, plan, emit_onnx=emit_onnx, signed=sign is not None, log=log) as staged:
            if (verify or strict) and syms is not None and syms.values:   # random values would decide no valid shape
                log(f"notice: not verified: input(s) {', '.join(syms.values)} decide shapes by their values, which "
                    f"only a run gives")
            elif verify or strict:
                tgt.verify(staged.path, reference, log, strict)
            report_accuracy(staged.path, tgt, float_model, quant, log)
            if sign is not None:   # last: the signature covers the final manifest
                from .signing import sign_bundle
                sign_bundle(staged.path, Path(sign))
            return staged.commit()
