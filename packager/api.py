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
from .manifest import build_manifest
from .model_load import load_model
from .passes.contrib import for_onnxruntime
from .passes.expand_functions import has_run_time_bodies
from .plan import layout
from .plan_build import QuantRequest, build_plan
from .quantize import DEFAULT_BUDGET, ImageOptions, parse_budget
from .quantize.report import report_accuracy
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
    bound = None if dynamic is False else frozenset(constants or {})
    m, rewritten = canonicalize(source, bound)
    # a static plan asks for a run-time-body op's input as a constant: it lowers the op, not its expanded body
    static_m = (lambda: canonicalize(source)[0]) if has_run_time_bodies(source, bound) else None
    for n in rewritten:
        log(f"notice: {n}")
    ort_source = for_onnxruntime(source) if rewritten else None   # onnxruntime runs the contrib ops themselves
    # -- analyze + optimize, quantize, lower (packager/plan_build.py): run-time shapes where the model allows --
    front = Front(m, constants, strict, optimize, keep_metadata, log)
    quant = QuantRequest(quantize, calibration, labels, images, calibration_method, qdq_placement, calibrate_fraction,
                         evaluation, accuracy_budget)
    built = build_plan(front, m, ort_source, tgt, input_shapes, constants, dynamic, strict, quant, log, static_m)
    # -- write (packager/manifest.py, the target's files), verify, report accuracy, sign: in the staging folder, so
    # an earlier bundle stays until commit --
    manifest = build_manifest(name, tgt.name, source, built.graph, built.lowered, rewritten + built.graph.notices,
                              profile, built.quant.info, built.optimization, built.syms, built.io_dims)
    with tempfile.TemporaryDirectory(prefix="edgepack-plan-") as tmp:   # the plan is never one bytes object
        plan = Path(tmp) / "model.plan"
        layout.write(built.lowered.plan, plan)
        built.lowered = None   # the plan's weights (views, or copies a lowering made) are on disk now
        with tgt.stage(out, manifest, built.shipped, plan, emit_onnx=emit_onnx, signed=sign is not None,
                       log=log) as staged:
            values = built.syms.values if built.syms is not None else ()
            if (verify or strict) and values:   # random values would decide no valid shape
                log(f"notice: not verified: input(s) {', '.join(values)} decide shapes by their values, which only a "
                    f"run gives")
            elif verify or strict:
                tgt.verify(staged.path, built.reference, log, strict)
            report_accuracy(staged.path, tgt, built.float_model, built.quant, log)
            if sign is not None:   # last: the signature covers the final manifest
                from .signing import sign_bundle
                sign_bundle(staged.path, Path(sign))
            return staged.commit()
