"""Standard ONNX ops that edgepack has no lowering for, but that onnx defines by a function body (schema
has_function / has_context_dependent_function: Attention-23, RMSNormalization, RotaryEmbedding-23,
GroupNormalization, MeanVarianceNormalization, the window functions, the losses, Swish, ...): each such node
is replaced by its body, built by onnx itself (the schema's function, or its context-dependent builder given the
node's input types) and inlined by onnx.inliner (which adapts a body written for another opset with onnx's
version converter), so the body's ops lower as usual. onnx's preview-domain ops defined so (ai.onnx.preview
FlexAttention) are accepted without --allow-domain and expanded the same way.

Runs on the loaded model before analysis (packager/optimizer.py canonicalize), so shape inference and
constant folding see the body: its shape arithmetic (Shape, Range, ...) folds at package time. A body op
that edgepack does not lower is refused by lowering under a node name that says where it came from
('<node>/<Op> body/<k>_<BodyOp>')."""
from __future__ import annotations

import onnx
import onnx.inliner
from onnx import helper

STANDARD = ("", "ai.onnx")
PREVIEW = "ai.onnx.preview"   # onnx's own ops still in preview (FlexAttention): expanded like the standard ones
MAX_ROUNDS = 4   # a body may call another function op (expanded in the next round)


def _registry() -> dict:
    from ..lowering.registry import REGISTRY, load_ops
    load_ops()
    return REGISTRY


def _default_opset(model: onnx.ModelProto) -> int:
    return next((i.version for i in model.opset_import if i.domain in STANDARD), 1)


def expandable(op_type: str, opset: int, domain: str = "") -> bool:
    """Whether onnx defines `op_type` (in `domain`, at `opset`) by a function body (whether that body can be
    used at this opset is decided when it is built: _body)."""
    try:
        s = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return False
    return bool(s.has_context_dependent_function or (s.has_function and s.function_opset_versions))


def opset_of(model: onnx.ModelProto, domain: str = "") -> int:
    if domain in STANDARD:
        return _default_opset(model)
    return next((i.version for i in model.opset_import if i.domain == domain), 1)


def preview_function(n: onnx.NodeProto, model: onnx.ModelProto) -> bool:
    """A node of onnx's preview domain that onnx defines by a function body (expanded here, so no custom code)."""
    return n.domain == PREVIEW and expandable(n.op_type, opset_of(model, PREVIEW), PREVIEW)


def _with_defaults(node: onnx.NodeProto, opset: int) -> onnx.NodeProto:
    """The node with the schema's default for every attribute it leaves out: a body refers to attributes by name
    (MeanVarianceNormalization's axes, the windows' periodic), and the inliner drops a reference to an absent one."""
    schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    have = {a.name for a in node.attribute}
    m = onnx.NodeProto()
    m.CopyFrom(node)
    for name, a in schema.attributes.items():
        if name not in have and a.default_value.type != onnx.AttributeProto.UNDEFINED:
            d = onnx.AttributeProto()
            d.CopyFrom(a.default_value)
            d.name = name
            m.attribute.append(d)
    return m


def _types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # noqa: BLE001 - types of graph inputs/initializers still help
        inferred = model
    g = inferred.graph
    types = {vi.name: vi.type for vi in [*g.input, *g.value_info, *g.output] if vi.type.HasField("tensor_type")
             and vi.type.tensor_type.elem_type}
    for t in g.initializer:
        types.setdefault(t.name, helper.make_tensor_type_proto(t.data_type, list(t.dims)))
    return types


LOCAL = "ai.edgepack.expand"   # the body as a model-local function of this domain, for onnx.inliner


def _body(node: onnx.NodeProto, opset: int, types: dict[str, onnx.TypeProto]) -> onnx.FunctionProto | None:
    """onnx's function body for this node: the context-dependent builders get the input types (an absent
    optional input: an empty type, which onnx.inliner's own path cannot express)."""
    s = onnx.defs.get_schema(node.op_type, opset, node.domain)
    if s.has_context_dependent_function:
        tps = [(types[i] if i else onnx.TypeProto()).SerializeToString() for i in node.input]
        raw = s.get_context_dependent_function_with_opset_version(opset, node.SerializeToString(), tps)
    else:
        raw = s.get_function_with_opset_version(opset)
        if not raw:   # defined for another opset only (Shrink: 18): onnx's version converter adapts it below
            raw = next((b for v in sorted(s.function_opset_versions, reverse=True)
                        if (b := s.get_function_with_opset_version(v))), None)
    if not raw:
        return None
    return onnx.FunctionProto.FromString(raw) if isinstance(raw, bytes) else raw


def _expand_node(node: onnx.NodeProto, model: onnx.ModelProto, types: dict[str, onnx.TypeProto],
                 label: str) -> list[onnx.NodeProto] | None:
    """The body of one call, its values renamed under `label`, or None when onnx cannot build it."""
    ins = [i for i in node.input if i]
    if any(i not in types for i in ins):
        return None
    outs = [o for o in node.output if o]
    opset = opset_of(model, node.domain)
    node = _with_defaults(node, opset)
    try:
        fn = _body(node, opset, types)
        if fn is None or not fn.node:
            return None
        fn.domain, fn.name = LOCAL, node.op_type
        call = onnx.NodeProto()
        call.CopyFrom(node)
        call.domain = LOCAL
        g = helper.make_graph([call], "call", [helper.make_value_info(i, types[i]) for i in dict.fromkeys(ins)],
                              [helper.make_value_info(o, types[o]) if o in types else
                               helper.make_empty_tensor_value_info(o) for o in outs])
        mini = helper.make_model(g, opset_imports=[*model.opset_import, helper.make_opsetid(LOCAL, 1)],
                                 functions=[fn])
        mini.ir_version = max(model.ir_version, 8)
        # convert_version: a body written for another opset (Swish's for 24, inside SwiGLU at 28) is adapted by
        # onnx's version converter, or refused where an op has no version here (Shrink's CastLike at opset 9)
        body = onnx.inliner.inline_local_functions(mini, convert_version=True).graph.node
    except Exception:  # noqa: BLE001 - onnx cannot build this body (e.g. an unknown input type): not expanded
        return None
    if any(n.domain == LOCAL for n in body):
        return None
    keep = set(ins) | set(outs) | {""}

    def ren(v: str) -> str:   # every body value under the call's label, If/Loop/Scan bodies' own values too
        return v if v in keep else f"{label}/{v}"
    out = []
    for k, n in enumerate(body):
        m = onnx.NodeProto()
        m.CopyFrom(n)
        m.name = f"{label}/{node.op_type} body/{k}_{n.op_type}"
        _rename_node(m, ren)
        out.append(m)
    return out


def _rename_node(n: onnx.NodeProto, ren) -> None:
    n.input[:] = [ren(v) for v in n.input]
    n.output[:] = [ren(v) for v in n.output]
    for a in n.attribute:
        for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
            for vi in [*g.input, *g.output, *g.value_info]:
                vi.name = ren(vi.name)
            for t in g.initializer:
                t.name = ren(t.name)
            for m in g.node:
                _rename_node(m, ren)


# Ops lowered from package-time values of one input (op -> its index), expanded instead when that input is fed at
# run time (a graph input: a value input then, read by the body's Range / Slice / Pad while the core resolves
# shapes): the windows' size, CenterCropPad's shape
RUN_TIME_BODIES = {"HannWindow": 0, "HammingWindow": 0, "BlackmanWindow": 0, "CenterCropPad": 1}


def _run_time_input(n: onnx.NodeProto, fed: set[str]) -> bool:
    """A RUN_TIME_BODIES node whose deciding input is fed at run time."""
    k = RUN_TIME_BODIES.get(n.op_type)
    return k is not None and k < len(n.input) and n.input[k] in fed


def has_run_time_bodies(model: onnx.ModelProto, bound: frozenset[str] | None) -> bool:
    """Whether expand_functions(model, bound) expands a RUN_TIME_BODIES node because its input is fed at run time."""
    if bound is None:
        return False
    fed = {i.name for i in model.graph.input} - {i.name for i in model.graph.initializer} - bound
    return any(_run_time_input(n, fed) for n in model.graph.node)


def expand_functions(model: onnx.ModelProto, bound: frozenset[str] | None = None) -> tuple[onnx.ModelProto, dict[str, int]]:
    """Replace (in a copy) every main-graph node of a standard op without lowering by its ONNX function body (and,
    unless bound is None (a static plan: such an input is asked for as a constant), RUN_TIME_BODIES whose input is a
    graph input not in bound (--const)). Returns the model and how many nodes of each op were expanded."""
    registry = _registry()
    opset = _default_opset(model)
    expanded: dict[str, int] = {}
    fed = set() if bound is None else {i.name for i in model.graph.input} - {i.name for i in model.graph.initializer} - bound
    for _ in range(MAX_ROUNDS):
        todo = {i for i, n in enumerate(model.graph.node) if (n.domain in STANDARD and (
                n.op_type not in registry or _run_time_input(n, fed))
                and expandable(n.op_type, opset)) or preview_function(n, model)}   # indices: no stable identity
        if not todo:
            break
        if not expanded:
            m = onnx.ModelProto()
            m.CopyFrom(model)
            model = m
        types = _types(model)
        nodes, changed = [], False
        for i, n in enumerate(model.graph.node):
            body = _expand_node(n, model, types, n.name or f"{n.op_type}_{i}") if i in todo else None
            if body is None:
                keep = onnx.NodeProto()
                keep.CopyFrom(n)   # a copy: the graph's own node list is cleared below
                nodes.append(keep)
                continue
            nodes.extend(body)
            expanded[n.op_type] = expanded.get(n.op_type, 0) + 1
            changed = True
        if not changed:
            break
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    if any(n.op_type == "CastLike" and n.domain in STANDARD for n in model.graph.node):
        if not expanded:
            m = onnx.ModelProto()
            m.CopyFrom(model)
            model = m
        _cast_like_to_cast(model)
    return model, expanded


def _cast_like_to_cast(model: onnx.ModelProto) -> None:
    """Bodies cast their constants with CastLike(c, x): where x's type is known this is Cast(c, to=type), which
    folds at package time (a Pad's -inf fill value must be known then) instead of waiting for x's data."""
    types = _types(model)
    for n in model.graph.node:
        if n.op_type != "CastLike" or n.domain not in STANDARD or len(n.input) < 2 or n.input[1] not in types:
            continue
        to = types[n.input[1]].tensor_type.elem_type
        if not to:
            continue
        keep = [a for a in n.attribute if a.name == "saturate"]
        n.op_type = "Cast"
        del n.input[1:]
        del n.attribute[:]
        n.attribute.extend([helper.make_attribute("to", to), *keep])
