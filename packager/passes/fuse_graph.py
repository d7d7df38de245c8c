"""Epilogue fusion made visible in the shipped graph: each Conv/Gemm [+ residual Add] [+ activation] group
that the plan runs as one kernel (fuse_epilogue.fuse_epilogues finds them) becomes one call of a
model-local ONNX function in domain `ai.edgepack.fused` whose body is the original nodes.

The model stays standard ONNX (IR >= 8 local functions): onnxruntime and the onnx checker inline the
body, so the shipped model.onnx computes exactly what the unfused graph did, and its node count is the
kernel count. Head attributes are passed through by reference (ref_attr_name); the activation's
attributes get an `act_` prefix (Gemm and LeakyRelu both have an `alpha`). Lowering inlines the
functions back (onnx.inliner) and finds the same groups."""
from __future__ import annotations

import onnx
from onnx import helper

from .fuse_epilogue import Fused, fuse_epilogues

DOMAIN = "ai.edgepack.fused"
ACT_PREFIX = "act_"


def _ref(name: str, like: onnx.AttributeProto) -> onnx.AttributeProto:
    a = onnx.AttributeProto()
    a.name, a.type = like.name, like.type
    a.ref_attr_name = name
    return a


def fuse_graph(model: onnx.ModelProto, shapes: dict, consts: dict, opset: int) -> int:
    """Replace the epilogue groups of `model` (analyzed: static shapes, folded constants) by function calls,
    in place. Returns the number of groups."""
    g = model.graph
    steps = fuse_epilogues(list(g.node), [o.name for o in g.output], shapes, consts, opset)
    groups = [s for s in steps if isinstance(s, Fused)]
    if not groups:
        return 0
    functions: dict[tuple, onnx.FunctionProto] = {}
    new_nodes: list[onnx.NodeProto] = []
    for step in steps:
        if not isinstance(step, Fused):
            new_nodes.append(step)
            continue
        head = step.head
        add = next((n for n in step.absorbed if n.op_type == "Add" and step.residual is not None), None)
        act = next((n for n in step.absorbed if n is not add), None)
        # Formal inputs: the head's present inputs, the residual, the activation's extra present inputs.
        formals, actuals = [], []

        def formal(actual: str, tag: str) -> str:
            if not actual:
                return ""
            formals.append(tag)
            actuals.append(actual)
            return tag
        body_head = helper.make_node(head.op_type, [formal(x, f"X{i}") for i, x in enumerate(head.input)], ["h"])
        body_head.attribute.extend(_ref(a.name, a) for a in head.attribute)
        body = [body_head]
        y = "h"
        if add is not None:
            r = formal(step.residual, "R")
            body.append(helper.make_node("Add", [y, r], ["s"]))   # float addition commutes exactly
            y = "s"
        key = [head.op_type] + (["Add"] if add is not None else [])
        act_attrs = []
        if act is not None:
            extra = [formal(x, f"A{i}") for i, x in enumerate(act.input) if i > 0]
            body_act = helper.make_node(act.op_type, [y, *extra], ["Y"])
            for a in act.attribute:
                body_act.attribute.append(_ref(ACT_PREFIX + a.name, a))
                c = onnx.AttributeProto()
                c.CopyFrom(a)
                c.name = ACT_PREFIX + a.name
                act_attrs.append(c)
            body.append(body_act)
            key.append(act.op_type)
        else:
            body[-1].output[0] = "Y"
        sig = (tuple(key), tuple(formals))
        fn = functions.get(sig)
        name = fn.name if fn is not None else "_".join(key) + (f"_{len(functions)}" if any(
            f.name == "_".join(key) for f in functions.values()) else "")
        call = helper.make_node(name, actuals, [head.output[0]], name=head.name, domain=DOMAIN)
        call.attribute.extend(head.attribute)
        call.attribute.extend(act_attrs)
        new_nodes.append(call)
        attrs = sorted({a.name for a in call.attribute})
        if fn is None:
            functions[sig] = helper.make_function(DOMAIN, name, formals, ["Y"], body,
                                                  [helper.make_opsetid("", opset)], attributes=attrs)
        else:   # the same pattern with other attributes present: declare and reference their union
            _merge_attributes(fn, body, attrs)
    del g.node[:]
    g.node.extend(new_nodes)
    model.functions.extend(functions.values())
    if not any(o.domain == DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    model.ir_version = max(model.ir_version, 8)
    return len(groups)


def _merge_attributes(fn: onnx.FunctionProto, body: list[onnx.NodeProto], attrs: list[str]) -> None:
    have = set(fn.attribute)
    for a in attrs:
        if a not in have:
            fn.attribute.append(a)
    for fnode, bnode in zip(fn.node, body):
        known = {a.name for a in fnode.attribute}
        fnode.attribute.extend(a for a in bnode.attribute if a.name not in known)
