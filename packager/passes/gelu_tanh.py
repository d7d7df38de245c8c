"""The tanh form of GELU written out as nodes (GPT-2's `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`:
Mul, Pow, Mul, Add, Mul, Tanh, Add, Mul) becomes one Gelu(approximate="tanh") node before lowering: one UNARY
GELU_TANH pass instead of eight kernels, and, right after a MatMul/Gemm, the epilogue fusion (fuse_epilogue.py)
takes it as that kernel's activation. Either grouping of the 0.5: (0.5 * x) * (1 + tanh) or (x * (1 + tanh)) * 0.5.
Only when every intermediate value feeds the next node alone (and is no graph output)."""
from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper

from ..analyze import Graph
from .uses import consumers_of

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def fold_gelu_tanh(nodes: list, graph: Graph) -> list:
    consumers = consumers_of(nodes)
    outputs, consts = set(graph.outputs), graph.consts

    def sole(value: str, op: str):
        c = consumers.get(value, [])
        ok = len(c) == 1 and value not in outputs and isinstance(c[0], onnx.NodeProto) and c[0].op_type == op \
            and c[0].domain in ("", "ai.onnx")
        return c[0] if ok else None

    def const_operand(node, x: str, want: float) -> bool:
        """node's inputs are x and a one-element float constant close to want (within float32 rounding)."""
        if len(node.input) != 2 or x not in node.input:
            return False
        other = node.input[1] if node.input[0] == x else node.input[0]
        v = consts.get(other)
        return other != x and v is not None and np.asarray(v).size == 1 and \
            bool(np.isclose(float(np.asarray(v).reshape(-1)[0]), want, rtol=1e-6, atol=0.0))

    def chain(pw) -> tuple[str, list, str] | None:
        x = pw.input[0]
        if len(pw.input) != 2 or pw.input[1] not in consts or not const_operand(pw, x, 3.0) or pw.input[1] == x:
            return None
        cube = sole(pw.output[0], "Mul")
        if cube is None or not const_operand(cube, pw.output[0], 0.044715):
            return None
        inner = sole(cube.output[0], "Add")
        if inner is None or sorted(inner.input) != sorted([x, cube.output[0]]):
            return None
        scaled = sole(inner.output[0], "Mul")
        if scaled is None or not const_operand(scaled, inner.output[0], SQRT_2_OVER_PI):
            return None
        th = sole(scaled.output[0], "Tanh")
        one = sole(th.output[0], "Add") if th is not None else None
        if one is None or not const_operand(one, th.output[0], 1.0):
            return None
        last = sole(one.output[0], "Mul")
        if last is None or len(last.input) != 2:
            return None
        other = last.input[1] if last.input[0] == one.output[0] else last.input[0]
        body = [pw, cube, inner, scaled, th, one, last]
        users = consumers.get(x, [])
        if other == x:                                            # (x * (1 + tanh)) * 0.5
            half = sole(last.output[0], "Mul")
            if half is None or not const_operand(half, last.output[0], 0.5) or len(users) != 3:
                return None
            return x, body + [half], half.output[0]
        half = next((u for u in users if u.output and u.output[0] == other), None)   # (0.5 * x) * (1 + tanh)
        if half is None or half.op_type != "Mul" or not const_operand(half, x, 0.5) or len(users) != 3 or \
                sole(other, "Mul") is not last:
            return None
        return x, [half] + body, last.output[0]

    pos = {id(s): i for i, s in enumerate(nodes)}
    replace: dict[int, onnx.NodeProto] = {}
    taken: set[int] = set()
    for n in nodes:
        if not isinstance(n, onnx.NodeProto) or n.op_type != "Pow" or n.domain not in ("", "ai.onnx") or id(n) in taken:
            continue
        found = chain(n)
        if found is None or any(id(m) in taken for m in found[1]):
            continue
        x, members, y = found
        last = max(members, key=lambda m: pos[id(m)])
        replace[id(last)] = helper.make_node("Gelu", [x], [y], name=(n.name or y) + "_gelu_tanh", approximate="tanh")
        taken.update(id(m) for m in members)
    if not replace:
        return nodes
    return [replace.get(id(s), s) for s in nodes if id(s) in replace or id(s) not in taken]
