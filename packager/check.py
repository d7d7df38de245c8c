"""`package check MODEL`: what each target can run, without packaging.

The model goes through the packager's own front (safe load, analysis, optimizer) and lowering, with every refusal
collected instead of stopping at the first (packager/lower.py, lower_ctx(problems=...)); the report names each
node a target cannot run with the reason, grouped by op, and the model's symbolic dimensions."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx

from .errors import PackagerError, UnsupportedErrors, group_refusals


@dataclass
class SymbolicDim:
    input: str
    axis: int
    written: str      # what the model says: a dim_param name, "-1", "0", or "" (no value at all)


@dataclass
class TargetReport:
    target: str
    ok: bool
    problems: list[PackagerError] = field(default_factory=list)
    kernels: int = 0


@dataclass
class CheckReport:
    model: str
    opset: int | None
    nodes: int
    symbolic: list[SymbolicDim]
    targets: list[TargetReport]
    notices: list[str] = field(default_factory=list)
    load_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.load_error is None and all(t.ok for t in self.targets)


def symbolic_dims(model: onnx.ModelProto, constants: dict | None = None) -> list[SymbolicDim]:
    """Graph-input dims not fixed by the model: a dim_param, a dim_value <= 0 (exporters write -1 and 0 for
    'any'), or no value; initializers and --const inputs excluded."""
    skip = {i.name for i in model.graph.initializer} | set(constants or {})
    out = []
    for vi in model.graph.input:
        if vi.name in skip or not vi.type.tensor_type.HasField("shape"):
            continue
        for k, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            written = str(d.dim_value) if d.HasField("dim_value") else d.dim_param
            out.append(SymbolicDim(vi.name, k, written))
    return out


def _expand(problems: list[PackagerError]) -> list[PackagerError]:
    out: list[PackagerError] = []
    for p in problems:
        out.extend(getattr(p, "problems", None) or [p])
    return out


def check_model(model, targets: tuple[str, ...] = ("web", "pi5", "android"),
                input_shapes: dict | None = None, constants: dict[str, np.ndarray] | None = None,
                allow_domains: tuple[str, ...] = (), dynamic: bool = False, optimize: bool = True) -> CheckReport:
    from .front import Front
    from .targets import get_target
    from .lower import lower_ctx
    from .lowering.assemble import assemble
    from .model_load import load_model
    from .passes.subgraphs import CONTROL_OPS
    name = model.graph.name if isinstance(model, onnx.ModelProto) else str(model)
    try:
        m = load_model(model, frozenset(allow_domains))
    except PackagerError as e:
        return CheckReport(name, None, 0, [], [TargetReport(t, False, [e]) for t in targets], load_error=str(e))
    from .analyze import default_opset
    from .optimizer import canonicalize   # as package(): contrib and function-bodied ops become standard ONNX
    loaded_nodes = len(m.graph.node)
    try:
        m, _ = canonicalize(m, frozenset(constants or {}))
    except PackagerError as e:
        return CheckReport(name, None, 0, [], [TargetReport(t, False, [e]) for t in targets], load_error=str(e))
    report = CheckReport(name, default_opset(m), loaded_nodes, symbolic_dims(m, constants), [])
    problems: list[PackagerError] = []
    kernels = 0
    control = False
    try:
        front = Front(m, constants, False, optimize, False, lambda s: None)
        if dynamic:
            from .run_time_shapes import lower_run_time
            from .dynamic import find_symbols
            syms = find_symbols(m, input_shapes, constants)
            if syms.any:
                graph, _, _, lowered, _ = lower_run_time(front, syms)
                kernels = len(lowered.plan.nodes)
                control = any(n.op_type in CONTROL_OPS for n in graph.nodes)
                dynamic = True
            else:
                dynamic = False
        if not dynamic:
            graph, _, _ = front.run(input_shapes, quiet=True)
            report.notices = list(graph.notices)
            ctx, ins, outs = lower_ctx(graph, problems=problems)
            control = any(e.ctrl for e in ctx.emitted)
            if not problems and not control:
                kernels = len(assemble(ctx, ins, outs).plan.nodes)
            else:
                kernels = len(ctx.emitted)
    except PackagerError as e:   # analysis (or the run-time-shape lowering) stopped: that is the refusal
        problems = _expand([e])
    for t in targets:
        tp = list(problems)
        try:   # as package(): a target refuses the plans its runtime does not run
            get_target(t).check(control_flow=control and not dynamic)
        except PackagerError as e:
            tp.append(e)
        report.targets.append(TargetReport(t, not tp, tp, kernels))
    return report


def format_report(r: CheckReport) -> str:
    lines = [f"model    {r.model}" + (f" (opset {r.opset}, {r.nodes} nodes)" if r.opset is not None else "")]
    if r.load_error:
        lines.append(f"refused  {r.load_error}")
        return "\n".join(lines)
    if r.symbolic:
        for s in r.symbolic:
            what = (f"'{s.written}'" if s.written and not s.written.lstrip("-").isdigit()
                    else f"dim_value {s.written}" if s.written else "no value")
            lines.append(f"symbolic input '{s.input}' axis {s.axis}: {what} (fixed to 1 unless --input-shape or --dynamic)")
    else:
        lines.append("symbolic none (every input dim is fixed)")
    for n in r.notices:
        lines.append(f"notice   {n}")
    for t in r.targets:
        if t.ok:
            lines.append(f"target   {t.target}: packages ({t.kernels} kernel nodes)")
            continue
        probs = _expand(t.problems)
        grouped = [p for p in probs if hasattr(p, "op") and hasattr(p, "opset")]
        other = [p for p in probs if p not in grouped]
        n_nodes = len(grouped)
        lines.append(f"target   {t.target}: cannot package" + (f" ({n_nodes} node{'s' if n_nodes != 1 else ''} "
                                                               f"it cannot run)" if n_nodes else ""))
        for op, opset, reason, nodes in group_refusals(grouped):
            lines.append(f"  {op} (opset {opset}) x{len(nodes)}: {reason}")
            lines.append(f"      node{'s' if len(nodes) > 1 else ''}: {', '.join(repr(n) for n in nodes)}")
        for p in other:
            lines.append(f"  {str(p).splitlines()[0]}")
    return "\n".join(lines)


__all__ = ["check_model", "format_report", "CheckReport", "TargetReport", "SymbolicDim", "UnsupportedErrors"]
