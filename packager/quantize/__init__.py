"""Precision per target: the packaging step between analysis and lowering (docs/quantization.md).

    none          float32 weights and compute
    fp16          float32 compute, weights stored as float16 (half the download)
    int8          static int8 QDQ, calibrated on DATA (refused without it: ranges are never guessed)
    int8-dynamic  int8 MatMul weights, activations quantized at run time (transformers; no DATA needed)
    auto          with DATA: int8 (models with Conv) or int8-dynamic (MatMul-heavy, no Conv) if it keeps the
                  accuracy budget on the evaluation samples, else fp16, else none; without DATA: none

quantize_step() resolves the mode, loads and splits the calibration data, rewrites the graph and returns
what lowering, the manifest and the accuracy report need."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
import onnx.inliner
from onnx import helper

from ..errors import PackagerError
from .calib_data import CalibrationSet, ImageOptions, InputSpec, load_calibration
from .ort_quant import CALIBRATION_METHODS

MODES = ("none", "fp16", "int8", "int8-dynamic", "auto")
PLACEMENTS = ("fusion-aware", "naive")
RANDOM_EVAL_SAMPLES = 8
GUARD_SAMPLES = 4           # int8-dynamic guard: samples (calibration part, else seeded random, seeds 100+)
GUARD_COSINE = 0.99         # ... and the worst cosine similarity to float32 it must keep
MIN_CALIBRATION_SAMPLES = 32   # fewer: activation ranges from a handful of inputs (a warning, not a refusal)
MIN_EVALUATION_SAMPLES = 20    # fewer: the accuracy figures are anecdotes (a warning)
DEFAULT_BUDGET = "top1=0.99,cosine=0.99"
__all__ = ["MODES", "PLACEMENTS", "CALIBRATION_METHODS", "DEFAULT_BUDGET", "ImageOptions", "QuantResult",
           "parse_budget", "quantize_step", "resolve_auto"]


@dataclass
class QuantResult:
    graph: object                          # analyze.Graph to lower
    mode: str                              # resolved precision
    weights_fp16: bool
    info: dict                             # manifest["precision"]
    evaluate: CalibrationSet | None        # samples for the accuracy report (None: no report)
    eval_note: str = ""

    def shipped_model(self) -> onnx.ModelProto:
        """The model.onnx the bundle carries (float16 initializers + Cast when fp16)."""
        if self.weights_fp16:
            from .fp16 import model_with_fp16_weights
            return model_with_fp16_weights(self.graph.model)
        return self.graph.model


def resolve_auto(target: str, has_data: bool, model: onnx.ModelProto) -> tuple[str, str]:
    """The documented default of every target (docs/quantization.md)."""
    if not has_data:
        return "none", (f"auto on {target}: no calibration data -> float32 (int8 ranges are never guessed; "
                        f"--quantize fp16 halves the weights, int8-dynamic suits MatMul-heavy models)")
    consts = {i.name for i in model.graph.initializer}
    ops = {n.op_type for n in model.graph.node}
    if "Conv" not in ops and any(n.op_type == "MatMul" and n.input[1] in consts for n in model.graph.node):
        return "int8-dynamic", (f"auto on {target}: MatMul weights and no Conv (a transformer) -> int8-dynamic, "
                                f"guarded by the calibration data (activation ranges measured at run time)")
    return "int8", f"auto on {target}: calibration data given -> int8 (4x smaller weights, int8 kernels)"


def input_specs(graph) -> list[InputSpec]:
    return [InputSpec(n, tuple(graph.shapes[n]), np.dtype(helper.tensor_dtype_to_np_dtype(graph.dtypes[n])))
            for n in graph.inputs]


def _random_set(graph, n: int, first_seed: int = 0) -> CalibrationSet:
    from ..reference import input_ranges, random_inputs
    specs = [{"name": s.name, "shape": list(s.shape), "dtype": s.dtype.name} for s in input_specs(graph)]
    ranges = input_ranges(graph.model)   # token ids within their table, masks 0 / 1
    feeds = [random_inputs(specs, seed=first_seed + i, ranges=ranges) for i in range(n)]
    return CalibrationSet({s["name"]: np.stack([f[s["name"]] for f in feeds]) for s in specs}, None, "random")


def _worst_cosine(float_model: onnx.ModelProto, data: CalibrationSet) -> Callable[[onnx.ModelProto], float]:
    """Score of a candidate model: its worst per-sample cosine similarity to the float32 model (onnxruntime)."""
    from ..reference import reference_session
    from .report import cosine
    reference = reference_session(float_model)
    want = [reference(data.feed(i)) for i in range(data.count)]

    def score(candidate: onnx.ModelProto) -> float:
        run = reference_session(candidate)
        return min(cosine(run(data.feed(i))[k], w) for i, outs in enumerate(want) for k, w in outs.items()
                   if w.dtype.kind == "f")
    return score


def _name_unnamed_nodes(model: onnx.ModelProto) -> None:
    """Names for nodes that have none (an inlined function body's nodes, e.g. a fused MatMul's): onnxruntime's
    dynamic quantizer selects and excludes nodes by name, and the manifest lists the MatMuls kept in float32."""
    taken = {n.name for n in model.graph.node if n.name}
    for n in model.graph.node:
        if not n.name:
            name = f"{n.op_type}:{n.output[0]}" if n.output else n.op_type
            while name in taken:
                name += "'"
            n.name = name
            taken.add(name)


def parse_budget(spec: str) -> dict[str, float]:
    """'top1=0.99,cosine=0.999' -> {'top1': 0.99, 'cosine': 0.999}: the accuracy `auto` must keep."""
    budget: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, _, value = part.partition("=")
        try:
            v = float(value)
        except ValueError:
            v = -1.0
        if key not in ("top1", "cosine") or not 0.0 < v <= 1.0:
            raise PackagerError(f"accuracy budget '{part}': expected top1=F and/or cosine=F with F in (0, 1] "
                                f"(e.g. --accuracy-budget top1=0.99,cosine=0.999)")
        budget[key] = v
    if not budget:
        raise PackagerError("empty accuracy budget (e.g. --accuracy-budget top1=0.99)")
    return budget


def _within(outputs: dict, budget: dict[str, float]) -> tuple[bool, str]:
    """Does a measurement (report.measure) keep the budget? Top-1 agreement counts where an output has one
    (a last axis > 1); cosine (mean over samples) for every float output."""
    worst: dict[str, float] = {}
    for o in outputs.values():
        for key, field in (("top1", "top1_agreement"), ("cosine", "cosine_mean")):
            if key in budget and field in o:
                worst[key] = min(worst.get(key, 1.0), o[field])
    if not worst:
        return True, "no float output to measure"
    fails = [f"{k} {v:.4f} < {budget[k]}" for k, v in worst.items() if v < budget[k]]
    told = ", ".join(f"{k} {v:.4f}" for k, v in worst.items())
    return not fails, ("; ".join(fails) if fails else told)


def _sample_warnings(calib: "CalibrationSet | None", evaluate: "CalibrationSet | None", mode: str) -> list[str]:
    out = []
    if calib is not None and mode in ("int8",) and calib.count < MIN_CALIBRATION_SAMPLES:
        out.append(f"only {calib.count} samples calibrate the int8 activation ranges: give at least "
                   f"{MIN_CALIBRATION_SAMPLES} (better 100+) inputs like the ones the model will see")
    if evaluate is not None and evaluate.count < MIN_EVALUATION_SAMPLES:
        out.append(f"the accuracy report rests on {evaluate.count} samples: its figures are not a measurement; "
                   f"give at least {MIN_EVALUATION_SAMPLES} (more --calibration samples or --evaluation DATA)")
    return out


def quantize_step(graph, target: str, quantize: str = "auto", calibration: str | os.PathLike | dict | None = None,
                  labels: str | os.PathLike | np.ndarray | None = None, images: ImageOptions | None = None,
                  method: str = "minmax", placement: str = "fusion-aware", calibrate_fraction: float = 0.8,
                  strict: bool = False, log: Callable[[str], None] = lambda s: None,
                  evaluation: str | os.PathLike | dict | None = None,
                  accuracy_budget: str = DEFAULT_BUDGET) -> QuantResult:
    if quantize not in MODES:
        raise PackagerError(f"unknown --quantize '{quantize}' (available: {', '.join(MODES)})")
    if method not in CALIBRATION_METHODS:
        raise PackagerError(f"unknown --calibration-method '{method}' (available: {', '.join(CALIBRATION_METHODS)})")
    if placement not in PLACEMENTS:
        raise PackagerError(f"unknown --qdq-placement '{placement}' (available: {', '.join(PLACEMENTS)})")
    if not 0.0 < calibrate_fraction <= 1.0:
        raise PackagerError(f"calibrate fraction {calibrate_fraction} must be in (0, 1]")
    if labels is not None and calibration is None:
        raise PackagerError("--labels needs --calibration DATA (labels belong to its samples)")
    budget = parse_budget(accuracy_budget)
    specs = input_specs(graph)
    data = load_calibration(calibration, specs, labels, images) if calibration is not None else None
    held_out = load_calibration(evaluation, specs, None, images) if evaluation is not None else None
    mode, reason = (quantize, f"requested: {quantize}")
    if quantize == "auto":
        mode, reason = resolve_auto(target, data is not None, graph.model)
    if mode == "int8" and data is None:
        raise PackagerError("--quantize int8 needs calibration data to set activation ranges, and edgepack does not "
                            "guess them: give --calibration DATA (a .npz keyed by input name, a .npy, or a folder; "
                            "see docs/quantization.md), or use --quantize int8-dynamic (MatMul weights) or fp16")
    calib, evaluate, note = None, None, ""
    if held_out is not None:    # a separate evaluation set: every calibration sample calibrates
        calib, evaluate = data, held_out
        note = f"{held_out.count} evaluation samples ({held_out.source})" + \
            (f"; all {data.count} calibration samples calibrate" if data is not None else "")
    elif data is not None and mode in ("none", "fp16"):   # nothing is calibrated: every sample evaluates
        calib, evaluate, note = data, data, f"{data.count} samples, all evaluated ({mode} needs no calibration)"
    elif data is not None:
        calib, evaluate, note = data.split(calibrate_fraction) if calibrate_fraction < 1.0 else \
            (data, data, f"{data.count} samples: all calibrate and evaluate (no held-out split)")
    info: dict = {"mode": mode, "requested": quantize, "reason": reason, "fp16": mode == "fp16"}
    if data is not None:
        info["calibration"] = {"source": data.source, "samples": data.count, "split": note,
                               "labels": data.labels is not None}
    if held_out is not None:
        info["evaluation"] = {"source": held_out.source, "samples": held_out.count,
                              "labels": held_out.labels is not None}
    if evaluate is None and mode != "none":
        evaluate = _random_set(graph, RANDOM_EVAL_SAMPLES)
        note = f"{RANDOM_EVAL_SAMPLES} seeded random inputs (no calibration data given)"
    build = lambda m, i: _build(graph, target, m, quantize, i, calib, evaluate, note, method, placement,  # noqa: E731
                                strict, log)
    if quantize != "auto" or mode not in ("int8", "int8-dynamic") or evaluate is None:
        result = build(mode, info)
    else:
        result = _auto_by_budget(graph, build, info, evaluate, budget, log)
    warnings = _sample_warnings(calib, result.evaluate if data is not None or held_out is not None else None,
                                result.mode)
    for w in warnings:
        log(f"warning: {w}")
    if warnings:
        result.info["warnings"] = warnings
    return result


def _auto_by_budget(graph, build: Callable[[str, dict], QuantResult], info: dict, evaluate: "CalibrationSet",
                    budget: dict[str, float], log: Callable[[str], None]) -> QuantResult:
    """`auto` with data: the smallest precision whose measured accuracy (onnxruntime, the evaluation samples)
    keeps the budget; int8 (or int8-dynamic), then fp16, then float32, saying why each one was passed over."""
    from ..reference import reference_session
    from .report import measure
    reference = reference_session(graph.model)
    tried = []
    for mode in (info["mode"], "fp16"):
        candidate = build(mode, dict(info, mode=mode, fp16=mode == "fp16"))
        ok, why = _within(measure(reference_session(candidate.shipped_model()), reference, evaluate), budget)
        tried.append({"mode": mode, "within_budget": ok, "measured": why})
        if ok:
            candidate.info.update(reason=f"{info['reason']}; measured on {evaluate.count} evaluation samples "
                                         f"({why}) within the budget", budget=budget, tried=tried)
            return candidate
        log(f"auto: {mode} misses the accuracy budget on {evaluate.count} evaluation samples ({why})")
    result = build("none", dict(info, mode="none", fp16=False))
    result.info.update(reason=f"auto: int8 and fp16 both miss the accuracy budget {budget} -> float32",
                       budget=budget, tried=tried)
    return result


def _build(graph, target: str, mode: str, quantize: str, info: dict, calib: "CalibrationSet | None",
           evaluate: "CalibrationSet | None", note: str, method: str, placement: str, strict: bool,
           log: Callable[[str], None]) -> QuantResult:
    """The graph at one precision."""
    if mode == "none":
        info.update(weights="float32", activations="float32")
        if quantize == "auto" and target == "web":
            from .fp16 import fp16_weight_bytes
            before, after = fp16_weight_bytes(graph.model)
            if before - after >= 1 << 20:
                log(f"hint: --quantize fp16 would shrink the weights from {before / 2**20:.1f} MiB to "
                    f"{after / 2**20:.1f} MiB (int8 with --calibration DATA: about a quarter)")
        return QuantResult(graph, mode, False, info, evaluate, note)
    if mode == "fp16":
        from .fp16 import fp16_weight_bytes
        before, after = fp16_weight_bytes(graph.model)
        info.update(weights="float16 (stored), float32 (computed)", activations="float32",
                    initializer_bytes={"float32": before, "packaged": after})
        log(f"fp16: weights {before / 2**20:.2f} MiB -> {after / 2**20:.2f} MiB")
        return QuantResult(graph, mode, True, info, evaluate, note)
    from ..analyze import analyze
    from .ort_quant import quantize_int8_dynamic, quantize_int8_static
    # The optimizer ships Conv/Gemm + activation groups as model-local functions (docs/optimizer.md);
    # onnxruntime's quantizers only see top-level nodes: quantize the inlined graph.
    src = onnx.inliner.inline_local_functions(graph.model) if graph.model.functions else graph.model
    _name_unnamed_nodes(src)
    if mode == "int8":
        q = quantize_int8_static(src, calib, method, log)
        info["calibration"]["method"] = method
        info.update(weights="int8 per channel, symmetric (zero point 0)",
                    activations="int8 per tensor, symmetric (zero point 0)")
        if placement == "fusion-aware":
            from .qdq_placement import fusion_aware_placement
            q, rep = fusion_aware_placement(q)
            log(f"qdq placement: {rep.moved} activations moved next to their Conv/Gemm/MatMul, "
                f"{rep.pairs_removed} Q/DQ pairs removed ({rep.nodes_before} -> {rep.nodes_after} nodes)")
            info["qdq_placement"] = dict(rep.as_dict(), mode=placement)
        else:
            info["qdq_placement"] = {"mode": placement}
    else:
        guard = calib.subset(np.arange(min(GUARD_SAMPLES, calib.count))) if calib is not None else \
            _random_set(graph, GUARD_SAMPLES, first_seed=100)
        q, kept = quantize_int8_dynamic(src, log, _worst_cosine(src, guard), GUARD_COSINE)
        info.update(weights="int8 per tensor, symmetric, 7-bit range (MatMul weights)",
                    activations="uint8, quantized at run time (DynamicQuantizeLinear)",
                    guard={"min_cosine": GUARD_COSINE, "samples": guard.count, "float32_matmuls": kept})
    quantized = analyze(q, strict=strict)
    quantized.notices = graph.notices + quantized.notices   # e.g. the batch dims bound before quantization
    return QuantResult(quantized, mode, False, info, evaluate, note)
