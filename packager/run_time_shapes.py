"""Symbolic input dims resolved at run time (a version-2 plan, docs/plan-format.md): whether a model gets them
(run_time_symbols), and its lowering (lower_run_time: analyze and optimize at two probe shapes, lower at both,
keep what varies as shape arithmetic). The default falls back to fixed shapes (ones) with one notice (reason)."""
from __future__ import annotations

import numpy as np
import onnx

from .analyze import analyze
from .errors import PackagerError
from .front import Front
from .plan import layout
from .toolchain import ensure_wasm


def bounded(input_shapes: dict | None) -> bool:
    """Bounds ([min..max] or ?) in input_shapes: they ask for run-time shapes."""
    return any(not isinstance(d, (int, np.integer)) for s in (input_shapes or {}).values() for d in s)


def run_time_symbols(m: onnx.ModelProto, strict: bool, input_shapes: dict | None, constants: dict | None,
                      dynamic: bool | None, quantize: str, calibration, labels, evaluation=None):
    """The symbolic input dims to resolve at run time (packager/dynamic.Symbols); None: a static plan (no symbolic
    dims left, or asked for); a str: why the default cannot give run-time shapes (the caller falls back)."""
    asked = dynamic is True or bounded(input_shapes)
    if dynamic is False:
        if bounded(input_shapes):
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


def reason(e: Exception) -> str:
    """The first line of a version-2 refusal without its advice to give fixed shapes (the notice says how); an
    unexpected exception (a bug of the version-2 lowering) by its type, so it is reported, not hidden."""
    import re
    line = (str(e).splitlines() or [""])[0]
    if not isinstance(e, PackagerError):
        return f"the version-2 lowering failed ({type(e).__name__}: {line[:200]})"
    return re.sub(r"[:;,]?\s*\(?(give (this model )?fixed shapes|give them)[^)]*\)?\s*$", "", line) or line


def ones(m: onnx.ModelProto, input_shapes: dict | None, constants: dict | None) -> tuple[dict, str]:
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


def run_time_io(model: onnx.ModelProto, io_dims: dict[str, list]) -> onnx.ModelProto:
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


def lower_run_time(front: Front, syms, quiet: bool = False):
    """A version-2 plan (packager/dynamic.py): probe at two shapes, keep what varies as shape arithmetic,
    lower at both, check they agree, assemble. Returns (graph, reference, optimization, lowered, io dims).
    quiet: hold the log lines until it succeeds (the default falls back to fixed shapes on failure: its lines
    would be said twice)."""
    if quiet:
        held: list[str] = []
        log, front.log = front.log, held.append
        try:
            out = lower_run_time(front, syms)
        finally:
            front.log = log
        for line in held:
            log(line)
        return out
    from .dynamic import VALUE_DIM_PROBES, bounded_memory, compare_lowerings, varying_axes, varying_values
    from .lower import lower_ctx
    from .plan.dynamic import assemble_dynamic
    shapes_a, shapes_b = syms.shapes(syms.probe_a), syms.shapes(syms.probe_b)
    va, vb = VALUE_DIM_PROBES if syms.values else (0, 0)
    keep = varying_values(analyze(front.m, shapes_a, front.constants, value_dim=va).consts,
                          analyze(front.m, shapes_b, front.constants, value_dim=vb).consts)
    graph_a, reference, optimization = front.run(shapes_a, keep, value_dim=va)
    graph_b, _, _ = front.run(shapes_b, keep, quiet=True, value_dim=vb)
    axes = varying_axes(graph_a.shapes, graph_b.shapes)
    ctx_a, ins, outs = lower_ctx(graph_a, weights_fp16=front.weights_fp16, dynamic_axes=axes)
    ctx_b, _, _ = lower_ctx(graph_b, weights_fp16=front.weights_fp16, dynamic_axes=axes)
    varying = compare_lowerings(ctx_a, ctx_b)
    bounds = {n: [b if b else (1, 0) for b in bs] for n, bs in syms.bounds.items()}
    lowered = assemble_dynamic(ctx_a, ins, outs, varying, bounds, frozenset(syms.values))
    wasm = ensure_wasm()["edgepack.wasm"]
    bound = bounded_memory(lowered.plan, syms, wasm)
    if bound is None:   # the core opens the plan (every run-time dim has a shape function) and resolves it at the
        from .runtime.wasm import WasmPlan   # example shape; not with value inputs, whose values are the user's
        session = WasmPlan(wasm, layout.encode(lowered.plan))
        if not syms.values:
            session.set_shapes([syms.shapes(syms.example)[n] for n in syms.dims])
    if bound is not None:   # the plan promises this arena at most; the manifest states it with the rest of memory
        lowered.plan.dynamic.max_arena_bytes = bound[0]
        lowered.report["max_memory_bytes"] = bound[1]
    io_dims = {n: [s or d for s, d in zip(syms.dims[n], syms.fixed[n])] for n in graph_a.inputs}
    for n, t in zip(graph_a.outputs, outs):
        sa, sb = ctx_a.tensors[t].shape, ctx_b.tensors[t].shape
        io_dims[n] = [x if x == y else syms.symbol_for(x, y) for x, y in zip(sa, sb)]
    return graph_a, reference, optimization, lowered, io_dims
