"""Lowering: a static ONNX graph -> a plan (tensor table, kernel nodes, packed weights, arena offsets).

The driver: fuse (QDQ groups, epilogues), then lower each node with the function packager/lowering/registry.py
holds for its op (each op module in packager/ops/ registers with @lowers("OpType")), then assemble. Lowerings
read shapes/attributes through LowerCtx (packager/lowering/context.py) and raise UnsupportedError for anything
the kernels cannot do exactly; they never touch the plan bytes directly."""
from __future__ import annotations

from .analyze import Graph
from .errors import NeedsConstantError, PackagerError, UnsupportedError, collected, with_opset
from .lowering.assemble import assemble
from .lowering.context import LowerCtx, LoweredPlan
from .lowering.registry import FUSED_REGISTRY, REGISTRY, load_ops, registered_name
# The registration API at its former path: op modules written against `from ..lower import LowerCtx, lowers` work.
from .lowering import Tensor, lowers, lowers_fused  # noqa: F401
from .passes.fuse_epilogue import Fused, fuse_epilogues
from .plan.opcodes import DTYPES, Op


def lower(graph: Graph, fuse: bool = True, weights_fp16: bool = False) -> LoweredPlan:
    """A static (version 1) plan; with If/Loop/Scan nodes a version-2 plan of fixed dims (the core runs bodies).
    Every node edgepack cannot run is reported at once (errors.collected), not only the first."""
    problems: list[PackagerError] = []
    ctx, ins, outs = lower_ctx(graph, fuse, weights_fp16, problems=problems)
    if problems:
        raise collected(problems)
    if graph.data_dependent:
        return _lower_data_dependent(graph, ctx, ins, outs, fuse, weights_fp16)
    if any(e.ctrl for e in ctx.emitted):
        from .plan.dynamic import assemble_dynamic
        return assemble_dynamic(ctx, ins, outs, dict(ctx.run_dims), {})
    return assemble(ctx, ins, outs)


def _lower_data_dependent(graph: Graph, ctx: LowerCtx, ins: list[str], outs: list[str], fuse: bool,
                          weights_fp16: bool) -> LoweredPlan:
    """NonZero / NonMaxSuppression / Unique (packager/data_dependent.py): a version-2 plan whose dims after them
    follow their run. Lowered again with those outputs at capacity + 1: what differs is resolved at run time."""
    from dataclasses import replace
    from .data_dependent import probe_shapes
    from .dynamic import compare_lowerings, varying_axes
    from .plan.dynamic import assemble_dynamic, resolve_steps
    probe = replace(graph, shapes={**graph.shapes, **probe_shapes(graph.model, graph.shapes, graph.consts)})
    axes = varying_axes(graph.shapes, probe.shapes)
    ctx, ins, outs = lower_ctx(graph, fuse, weights_fp16, dynamic_axes=axes)
    ctx_b, _, _ = lower_ctx(probe, fuse, weights_fp16, dynamic_axes=axes)
    varying = compare_lowerings(ctx, ctx_b)
    for name, flags in ctx.run_dims.items():
        varying[name] = tuple(a or b for a, b in zip(varying.get(name, flags), flags))
    for s in resolve_steps(ctx):   # shape arithmetic runs before the counts exist: it may not read them
        e = ctx.emitted[s]
        if e.op == Op.SHAPE and any(varying.get(e.inputs[0], ())):
            raise PackagerError(f"node '{e.onnx_node}': the shape of '{e.inputs[0]}' is set when a NonZero / "
                                f"NonMaxSuppression / Unique before it runs, so no shape (Reshape, Expand, "
                                f"ConstantOfShape, ...) can be computed from it while resolving")
    return assemble_dynamic(ctx, ins, outs, varying, {})


def _step_io(step) -> tuple[list[str], list[str]]:
    """Inputs and outputs of a lowering step: an ONNX node, a Fused group or an integer kernel group."""
    if isinstance(step, Fused):
        return [*step.head.input, *([step.residual] if step.residual else [])], list(step.head.output)
    return list(step.input), list(step.output)


def lower_ctx(graph: Graph, fuse: bool = True, weights_fp16: bool = False,
              dynamic_axes: dict[str, set[int]] | None = None,
              problems: list[PackagerError] | None = None) -> tuple[LowerCtx, list[str], list[str]]:
    """Lower every node: the context with its tensors and emitted kernels, the plan's inputs and outputs.
    problems: when given, each node's refusal (UnsupportedError, NeedsConstantError) is appended there and lowering
    goes on with the next node (nodes reading a refused node's outputs are skipped: their refusal would only
    repeat it); the context is then incomplete and only good for the report."""
    load_ops()
    ctx = LowerCtx(graph, dynamic_axes)
    for name in graph.inputs:
        ctx._ensure(name)
    # Nodes analyze computed but kept in the model (DequantizeLinear of weights) produce constants only.
    steps: list = [n for n in graph.nodes if not (n.output and all(o in graph.consts for o in n.output if o))]
    if fuse:
        from .passes.fuse_attention import fuse_attention
        from .passes.gelu_tanh import fold_gelu_tanh
        from .passes.qdq_fusion import fuse_qdq
        steps = fuse_qdq(steps, graph)   # QDQ groups -> integer kernels, before the float epilogue fusion
        steps = fuse_attention(steps, graph)   # MatMul -> Softmax -> MatMul: one ATTENTION kernel
        steps = fold_gelu_tanh(steps, graph)   # GPT-2's 8-node GELU: one Gelu(tanh), an epilogue after a MatMul
        fused = fuse_epilogues(steps, graph.outputs, graph.shapes, graph.consts, graph.opset)
        if all(not isinstance(s, Fused) or s.head.op_type in FUSED_REGISTRY for s in fused):
            steps = fused
    refused: set[str] = set()   # outputs of refused nodes (collecting only)
    source = getattr(graph, "source_opset", None)   # the model's opset when analysis converted it
    for node in steps:
        ins, outs = _step_io(node)
        head = node.head if isinstance(node, Fused) else node
        try:
            if problems is not None and any(i in refused for i in ins if i):
                _check_has_kernel(ctx, graph, head)   # its own missing kernel is still worth naming
                refused.update(o for o in outs if o)
                continue
            _lower_step(ctx, graph, node)
        except (UnsupportedError, NeedsConstantError) as e:
            if source and source != graph.opset:
                e = with_opset(e, source)
            if problems is None:
                raise e from None
            problems.append(e)
            refused.update(o for o in outs if o)
    if problems:
        return ctx, graph.inputs, list(graph.outputs)
    ctx._current = "output"
    # Outputs that are weights or duplicates of another output/input need a copy into their own arena tensor.
    out_names: list[str] = []
    for o in graph.outputs:
        ctx._ensure(o)
        t = ctx.tensors[o]
        if t.data is not None or o in out_names:
            dst = ctx.temp(t.shape, DTYPES[t.dtype], "out")
            ctx.emit(Op.COPY, [o], [dst], [])
            o = dst
        out_names.append(o)
    if weights_fp16:   # float32 weights stored as float16, widened once by prologue CASTs (packager/quantize/fp16.py)
        from .quantize.fp16 import store_weights_fp16
        store_weights_fp16(ctx)
    return ctx, graph.inputs, out_names


def _check_has_kernel(ctx: LowerCtx, graph: Graph, node) -> None:
    """The refusals that need no shapes: a custom domain, an op with no lowering."""
    name = node.name or (node.output[0] if node.output else "")
    if getattr(node, "emit_plan", None) is not None or isinstance(node, Fused):
        return
    if registered_name(node) not in REGISTRY:
        if node.domain not in ("", "ai.onnx"):
            raise UnsupportedError(node.op_type, name, graph.opset,
                                   f"custom domain '{node.domain}' is not supported", domain=node.domain)
        raise UnsupportedError(node.op_type, name, graph.opset, "no edgepack kernel for this op")


def _lower_step(ctx: LowerCtx, graph: Graph, node) -> None:
    if getattr(node, "emit_plan", None) is not None:   # an integer kernel group (passes/qdq_fusion.py)
        ctx._current = node.name
        ctx._node = node.head
        node.emit_plan(ctx)
        return
    if isinstance(node, Fused):
        ctx._current = node.head.name or node.head.output[0]
        ctx._node = node.head
        extra = {"bias": node.bias} if node.bias is not None else {}   # MatMul's constant bias
        FUSED_REGISTRY[node.head.op_type](ctx, node.head, node.activation, node.residual, **extra)
        return
    ctx._current = node.name or node.output[0]
    ctx._node = node
    _check_has_kernel(ctx, graph, node)
    REGISTRY[registered_name(node)](ctx, node)
    for o in node.output:
        if o and o not in ctx.tensors:
            raise PackagerError(f"internal: lowering of {node.op_type} did not produce '{o}'")
