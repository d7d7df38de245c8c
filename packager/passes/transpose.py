"""Transpose elimination: inverse pairs cancel and identity permutations vanish (onnxscript's
transpose_transpose / no_op_transpose rules), and transposes move through elementwise ops when that
removes one (this module):
  Transpose_q(u(Transpose_p(x))) -> u(x)             u unary elementwise, q o p = identity
  f(Transpose_p(a), Transpose_p(b)) -> Transpose_p(f(a, b))   f binary elementwise (broadcast commutes
                                                              with a permutation applied to both sides)"""
from __future__ import annotations

import onnx_ir as ir
import onnx_ir.passes.common as common
from onnxscript.rewriter import RewriteRuleSet
from onnxscript.rewriter.rules.common import no_op_transpose_rule, transpose_transpose_rule

UNARY = {"Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Gelu", "Erf", "Exp", "Log", "Sqrt",
         "Neg", "Abs", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Elu", "Selu", "Celu", "Softplus",
         "Softsign", "Mish", "Sin", "Cos", "Cast", "Not", "ThresholdedRelu", "Identity"}
BINARY = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less", "Greater", "LessOrEqual",
          "GreaterOrEqual", "And", "Or", "Xor", "PRelu"}
LIBRARY_RULES = RewriteRuleSet([transpose_transpose_rule, no_op_transpose_rule])


def _perm(node: ir.Node) -> list[int] | None:
    if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx"):
        return None
    p = node.attributes.get_ints("perm", None)
    if p is None:
        shape = node.inputs[0].shape
        return None if shape is None else list(range(len(shape)))[::-1]
    return list(p)


def _sole_use(v: ir.Value) -> ir.Node | None:
    uses = list(v.uses())
    return uses[0][0] if len(uses) == 1 and not v.is_graph_output() else None


def _copy(node: ir.Node, inputs: list[ir.Value]) -> ir.Node:
    return ir.node(node.op_type, inputs, dict(node.attributes), domain=node.domain, name=node.name)


def push_transposes(model: ir.Model) -> int:
    """The two rewrites of the module docstring, in place; returns how many applied."""
    g, n = model.graph, 0
    for node in list(g):
        if node.graph is not g or node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type in UNARY and len(node.inputs) == 1 and len(node.outputs) == 1:
            t0 = node.inputs[0].producer() if node.inputs[0] is not None else None
            p = _perm(t0) if t0 is not None else None
            t1 = _sole_use(node.outputs[0])
            q = _perm(t1) if t1 is not None else None
            if p is None or q is None or _sole_use(t0.outputs[0]) is not node or len(p) != len(q) or \
                    [p[i] for i in q] != list(range(len(p))):
                continue
            new = _copy(node, [t0.inputs[0]])
            ir.convenience.replace_nodes_and_values(g, t1, [node, t1], [new], [t1.outputs[0]], [new.outputs[0]])
            g.remove(t0, safe=True)
            n += 1
        elif node.op_type in BINARY and len(node.inputs) == 2 and len(node.outputs) == 1 and \
                all(v is not None for v in node.inputs):
            ts = [v.producer() for v in node.inputs]
            if any(t is None for t in ts) or ts[0] is ts[1]:
                continue
            ps = [_perm(t) for t in ts]
            if ps[0] is None or ps[0] != ps[1] or any(_sole_use(t.outputs[0]) is not node for t in ts):
                continue
            new = _copy(node, [t.inputs[0] for t in ts])
            tr = ir.node("Transpose", [new.outputs[0]], {"perm": ps[0]}, name=f"{ts[0].name}_pushed")
            ir.convenience.replace_nodes_and_values(g, node, [node], [new, tr], [node.outputs[0]], [tr.outputs[0]])
            g.remove(ts, safe=True)
            n += 1
    return n


def eliminate_transposes(model: ir.Model) -> ir.Model:
    while push_transposes(model) + LIBRARY_RULES.apply_to_model(model):
        pass
    common.IdentityEliminationPass()(model)   # a cancelled pair leaves an Identity
    return model
