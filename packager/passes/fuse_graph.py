"""Epilogue fusion made visible in the shipped graph: each Conv/Gemm/MatMul [+ residual Add] [+ activation] group
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
        if step.chain:
            new_nodes.append(_chain_call(step, functions, opset))
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


def _chain_call(step: Fused, functions: dict, opset: int) -> onnx.NodeProto:
    """A group given as its original nodes (MatMul groups and GELU chains: the bias Add and the GELU's five nodes have no
    attributes to pass): the body is those nodes with the group's outside inputs as formals X0.. (constants
    included: a function body cannot see the graph's initializers) and its output as Y."""
    produced = {o for n in step.chain for o in n.output}
    actuals: list[str] = []
    rename: dict[str, str] = {}
    for n in step.chain:
        for x in n.input:
            if x and x not in produced and x not in rename:
                rename[x] = f"X{len(actuals)}"
                actuals.append(x)
    out = step.chain[-1].output[0]
    body = []
    for i, n in enumerate(step.chain):
        for o in n.output:
            rename.setdefault(o, "Y" if o == out else f"t{i}")
        b = helper.make_node(n.op_type, [rename.get(x, "") for x in n.input], [rename[o] for o in n.output])
        b.attribute.extend(n.attribute)
        body.append(b)
    sig = ("chain", tuple((b.op_type, tuple(b.input), tuple(b.output), b.SerializeToString()) for b in body))
    fn = functions.get(sig)
    if fn is None:
        base = "_".join(b.op_type for b in body)
        taken = {f.name for f in functions.values()}
        name = base if base not in taken else f"{base}_{len(functions)}"
        fn = functions[sig] = helper.make_function(DOMAIN, name, [f"X{i}" for i in range(len(actuals))], ["Y"], body,
                                                   [helper.make_opsetid("", opset)])
    return helper.make_node(fn.name, actuals, [out], name=step.chain[0].name, domain=DOMAIN)


def _merge_attributes(fn: onnx.FunctionProto, body: list[onnx.NodeProto], attrs: list[str]) -> None:
    have = set(fn.attribute)
    for a in attrs:
        if a not in have:
            fn.attribute.append(a)
    for fnode, bnode in zip(fn.node, body):
        known = {a.name for a in fnode.attribute}
        fnode.attribute.extend(a for a in bnode.attribute if a.name not in known)
