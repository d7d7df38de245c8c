"""The stage between loading and writing: analyze + optimize (packager/front.py), quantize (packager/quantize) and
lower (packager/lower.py) into the plan. Shapes are resolved at run time (a version-2 plan) where the model has
symbolic dims and allows it (packager/run_time_shapes.py decides), else fixed, with one notice saying why."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import onnx

from .dynamic import smaller_probes
from .errors import PackagerError
from .front import Front
from .lower import lower
from .plan.opcodes import Op
from .quantize import DEFAULT_BUDGET, ImageOptions, QuantResult, quantize_step
from .run_time_shapes import bounded, lower_run_time, ones, reason, run_time_symbols, run_time_io
from .targets.base import Target

CONTROL_FLOW = (Op.IF, Op.LOOP, Op.SCAN)


@dataclass(frozen=True)
class QuantRequest:
    """What the user asked of the quantizer (`package --help`, docs/quantization.md)."""
    mode: str = "auto"
    calibration: str | os.PathLike | dict | None = None
    labels: str | os.PathLike | np.ndarray | None = None
    images: ImageOptions | None = None
    method: str = "minmax"
    placement: str = "fusion-aware"
    calibrate_fraction: float = 0.8
    evaluation: str | os.PathLike | dict | None = None
    budget: str = DEFAULT_BUDGET

    def run(self, graph, target: str, strict: bool, log: Callable[[str], None], mode: str | None = None) -> QuantResult:
        return quantize_step(graph, target, mode or self.mode, self.calibration, self.labels, self.images, self.method,
                             self.placement, self.calibrate_fraction, strict, log, self.evaluation, self.budget)


@dataclass
class Built:
    """The plan and the models around it: `reference` is what the bundle is verified against, `float_model` what the
    accuracy report compares with, `shipped` the graph model.onnx would hold."""
    graph: Any
    lowered: Any
    quant: QuantResult
    reference: onnx.ModelProto
    float_model: onnx.ModelProto
    shipped: onnx.ModelProto
    optimization: Any    # what the optimizer did (the manifest reports it)
    syms: Any            # the run-time symbols of a version-2 plan, None for a static one
    io_dims: dict | None


def build_plan(front: Front, m: onnx.ModelProto, ort_source: onnx.ModelProto | None, tgt: Target,
               input_shapes: dict | None, constants: dict | None, dynamic: bool | None, strict: bool,
               quant: QuantRequest, log: Callable[[str], None],
               static_m: Callable[[], onnx.ModelProto] | None = None) -> Built:
    """dynamic: None = run-time shapes where possible, else fixed with one notice; True = run-time shapes or an
    error; False = fixed shapes (symbolic dims set to 1 where input_shapes does not give them). static_m: the model
    a static plan starts from when it differs from m (m expanded ops whose deciding input is fed at run time)."""
    def static(fallback: str | None) -> Built:
        f = front if static_m is None else Front(static_m(), front.constants, front.strict, front.optimize,
                                                 front.keep_metadata, front.log)
        return _fixed(f, m, ort_source, tgt, input_shapes, constants, strict, quant, log, fallback)

    syms = run_time_symbols(m, strict, input_shapes, constants, dynamic, quant.mode, quant.calibration, quant.labels,
                            quant.evaluation)
    if isinstance(syms, str):
        return static(syms)
    if syms is None:
        return static(None)
    try:
        graph, _, optimization, lowered, io_dims, syms = _lower_run_time_probed(front, syms)
    except Exception as e:   # noqa: BLE001 - the default must not fail where the static plan works
        if dynamic or bounded(input_shapes):   # asked for: run-time shapes or a clear error
            raise
        return static(reason(e))
    for n in syms.notes:   # a dim_value <= 0: say what it became
        log(f"notice: {n}")
        graph.notices.append(n)
    quant_result = quant.run(graph, tgt.name, strict, log, mode="none")   # the version-2 path ships float32
    shipped = run_time_io(graph.model, io_dims)
    return Built(graph, lowered, quant_result, front.source_model(ort_source), shipped, shipped, optimization, syms,
                 io_dims)


def _lower_run_time_probed(front: Front, syms):
    """lower_run_time at the default probe extents, then at smaller ones (a model whose sequence cannot exceed a
    short position table); the first failure is the one reported. Returns its results and the symbols used."""
    try:
        return (*lower_run_time(front, syms, quiet=True), syms)
    except Exception as first:   # noqa: BLE001 - re-raised below unless the smaller probes succeed
        small = smaller_probes(syms)
        if small is None:
            raise
        try:
            out = lower_run_time(front, small, quiet=True)
        except Exception:   # noqa: BLE001
            raise first from None
        sizes = ", ".join(f"{s} {syms.probe_a[s]}/{syms.probe_b[s]} -> {small.probe_a[s]}/{small.probe_b[s]}"
                          for s in small.names() if small.probe_a[s] != syms.probe_a[s])
        small.notes.append(f"run-time shapes probed at smaller sizes ({sizes}): at the larger ones, {reason(first)}")
        return (*out, small)


def _fixed(front: Front, m: onnx.ModelProto, ort_source: onnx.ModelProto | None, tgt: Target,
           input_shapes: dict | None, constants: dict | None, strict: bool, quant: QuantRequest,
           log: Callable[[str], None], fallback: str | None) -> Built:
    """The static plan; `fallback` says why a model with symbolic dims did not get run-time shapes."""
    shapes, notice = input_shapes, None
    if fallback is not None:   # the symbolic dims set to 1 here, so the notice is one line, not one per dim
        shapes, fixed = ones(m, input_shapes, constants)
        notice = (f"run-time shapes not possible: {fallback}; packaged with fixed shapes instead, {fixed}, "
                  f"or --static for fixed shapes without this notice)")
    if bounded(shapes):   # bounds only on dims the model fixes: nothing is left to resolve at run time
        raise PackagerError("--input-shape bounds [min..max] name only dims the model fixes: give their sizes")
    graph, reference, optimization = front.run(shapes)
    if ort_source is not None:
        reference = front.source_model(ort_source)
    if notice is not None:
        graph.notices.append(notice)
    float_model = reference   # the accuracy report compares with the float32 model before any rewrite
    quant_result = quant.run(graph, tgt.name, strict, log)
    graph, shipped = quant_result.graph, quant_result.shipped_model()
    if quant_result.mode != "none":   # a changed precision: verify the bundle against the graph it ships
        reference = shipped
    lowered = lower(graph, weights_fp16=quant_result.weights_fp16 or front.weights_fp16)
    if notice is not None:   # said once the static plan exists (a model neither plan takes gets the error only)
        log(f"notice: {notice}")
    tgt.check(control_flow=any(n.op in CONTROL_FLOW for n in lowered.plan.nodes))   # If/Loop/Scan
    return Built(graph, lowered, quant_result, reference, float_model, shipped, optimization, None, None)
