"""Epilogue fusion: Conv/Gemm [+ residual Add] [+ activation] become one kernel node; so does
MatMul [+ constant bias Add along N] [+ residual Add] [+ activation]. The activation may also be one that
exporters write out as nodes: the Erf form of GELU (x * 0.5 * (1 + erf(x / sqrt 2)), either grouping) and SiLU
(x * Sigmoid(x)).

The fused kernel applies bias, adds the residual and runs the activation while each output tile is
still in registers: one pass over memory instead of three. The group is emitted where its LAST node
stood, so a residual computed after the Conv (a ResNet shortcut) is ready when the kernel runs.
The optimizer makes the same groups visible in the shipped graph as function calls (fuse_graph.py);
lowering inlines them again and regroups with this pass, so --no-optimize bundles fuse the same way."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper

# Activation codes, generated from wasm_kernels/spec/ops.json (UNARY's fusable codes).
from ..plan.opspec import (ACT_CLIP, ACT_GELU, ACT_GELU_TANH, ACT_HARDSIGMOID, ACT_HARDSWISH, ACT_LEAKY_RELU, ACT_NONE,
                           ACT_RELU, ACT_SIGMOID, ACT_SILU, ACT_TANH)
from .uses import consumers_of

HEADS = ("Conv", "Gemm", "MatMul")
# What the conv/gemm epilogues apply (gemm.h): relu/leaky_relu/clip in registers, the others through
# ep_apply_activation (the UNARY kernel's own code, so fused and unfused give the same bits).
EPILOGUE_ACTIVATIONS = frozenset(range(ACT_RELU, ACT_GELU_TANH + 1)) | {ACT_SILU}


@dataclass
class Fused:
    head: onnx.NodeProto                   # the Conv/Gemm, with its output renamed to the group's output
    activation: tuple[int, list[float]] = (ACT_NONE, [])
    residual: str | None = None
    absorbed: list[onnx.NodeProto] = field(default_factory=list)
    bias: str | None = None                # MatMul only: a constant of N elements added along the last dim
    chain: list[onnx.NodeProto] = field(default_factory=list)   # MatMul, GELU-chain and SiLU groups: the nodes, in order


def activation_of(node: onnx.NodeProto, consts: dict[str, np.ndarray], opset: int) -> tuple[int, list[float]] | None:
    """The epilogue form of an activation node, or None if it has none (or needs runtime inputs)."""
    a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    t = node.op_type
    if t == "Relu":
        return ACT_RELU, []
    if t == "LeakyRelu":
        return ACT_LEAKY_RELU, [float(a.get("alpha", 0.01))]
    if t == "Clip":
        if opset < 11:
            return ACT_CLIP, [float(a.get("min", -3.4028234663852886e38)), float(a.get("max", 3.4028234663852886e38))]
        bounds = []
        for i, default in ((1, -np.inf), (2, np.inf)):
            name = node.input[i] if len(node.input) > i else ""
            if name and name not in consts:
                return None
            bounds.append(float(consts[name]) if name else default)
        return ACT_CLIP, [max(bounds[0], -3.4028234663852886e38), min(bounds[1], 3.4028234663852886e38)]
    if t == "Sigmoid":
        return ACT_SIGMOID, []
    if t == "HardSigmoid":
        return ACT_HARDSIGMOID, [float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))]
    if t == "HardSwish":
        return ACT_HARDSWISH, []
    if t == "Tanh":
        return ACT_TANH, []
    if t == "Gelu":
        approx = a.get("approximate", b"none")
        approx = approx.decode() if isinstance(approx, bytes) else approx
        return {"none": (ACT_GELU, []), "tanh": (ACT_GELU_TANH, [])}.get(approx)
    return None


def _scalar(consts: dict[str, np.ndarray], name: str) -> float | None:
    v = consts.get(name)
    return float(np.asarray(v).reshape(-1)[0]) if v is not None and np.asarray(v).size == 1 else None


def _other(node: onnx.NodeProto, x: str) -> str:
    return node.input[1] if node.input[0] == x else node.input[0]


def _is_const(c: float, want: float) -> bool:
    """c is want to float32 precision, or c is want's float16 rounding as a float16 graph writes it (GELU's sqrt(2)
    as 1.4140625: 1e-4 off, which moves GELU by far less than a float16 step; packager/passes/float16.py widens such
    graphs to float32 exactly, so the constant arrives as that float16 value)."""
    return bool(np.isclose(c, want, rtol=1e-6)) or (float(np.float16(c)) == c and np.float16(c) == np.float16(want))


def gelu_erf_chain(y: str, consumers_of, consts: dict[str, np.ndarray]) -> list[onnx.NodeProto] | None:
    """The nodes of x * 0.5 * (1 + erf(x / sqrt 2)) on x = y, as torch exports it (Div or Mul by the constant,
    Erf, Add 1, then Mul x and Mul 0.5 in either grouping), or None. consumers_of(v) lists v's consumers (empty
    when v is a graph output)."""
    users = consumers_of(y)
    if len(users) != 2:
        return None
    for scale, other in ((users[0], users[1]), (users[1], users[0])):
        if scale.op_type not in ("Div", "Mul") or scale.input[0] != y or len(scale.input) != 2:
            continue
        c = _scalar(consts, scale.input[1])
        if c is None or not _is_const(c, np.sqrt(2.0) if scale.op_type == "Div" else np.sqrt(0.5)):
            continue
        nxt = consumers_of(scale.output[0])
        if len(nxt) != 1 or nxt[0].op_type != "Erf":
            continue
        erf = nxt[0]
        nxt = consumers_of(erf.output[0])
        if len(nxt) != 1 or nxt[0].op_type != "Add" or _scalar(consts, _other(nxt[0], erf.output[0])) != 1.0:
            continue
        add = nxt[0]
        nxt = consumers_of(add.output[0])
        if len(nxt) != 1 or nxt[0].op_type != "Mul" or other.op_type != "Mul":
            continue
        mul = nxt[0]
        if mul is other and _other(mul, add.output[0]) == y:          # (x * (1 + erf)) * 0.5
            last = consumers_of(mul.output[0])
            if len(last) == 1 and last[0].op_type == "Mul" and _scalar(consts, _other(last[0], mul.output[0])) == 0.5:
                return [scale, erf, add, mul, last[0]]
        elif _scalar(consts, _other(other, y)) == 0.5 and _other(mul, add.output[0]) == other.output[0] and \
                [id(c) for c in consumers_of(other.output[0])] == [id(mul)]:                  # (x * 0.5) * (1 + erf)
            return [scale, erf, add, other, mul]
    return None


def silu_pair(y: str, consumers_of) -> list[onnx.NodeProto] | None:
    """[Sigmoid, Mul] of y * Sigmoid(y) (torch's SiLU export; either operand order), when y and the sigmoid feed
    nothing else, or None. consumers_of(v) lists v's consumers (empty when v is a graph output)."""
    users = consumers_of(y)
    if len(users) != 2:
        return None
    for sig, mul in ((users[0], users[1]), (users[1], users[0])):
        if sig.op_type == "Sigmoid" and mul.op_type == "Mul" and sorted(mul.input) == sorted([y, sig.output[0]]) \
                and [id(c) for c in consumers_of(sig.output[0])] == [id(mul)]:
            return [sig, mul]
    return None


def _matmul_bias(n: onnx.NodeProto, add: onnx.NodeProto, shapes: dict, consts: dict) -> str | None:
    """The constant operand of `add` if it is a bias along the MatMul's last dim (N elements, [.., 1, N])."""
    y = n.output[0]
    c = _other(add, y)
    sy, sc = shapes.get(y), shapes.get(c)
    if c == y or c not in consts or not sy or sc is None or shapes.get(add.output[0]) != sy:
        return None
    return c if len(sc) >= 1 and sc[-1] == sy[-1] and int(np.prod(sc)) == sy[-1] and len(sc) <= len(sy) else None


def fuse_epilogues(nodes: list[onnx.NodeProto], outputs: list[str], shapes: dict[str, tuple[int, ...]],
                   consts: dict[str, np.ndarray], opset: int,
                   activations: frozenset[int] = EPILOGUE_ACTIVATIONS) -> list[onnx.NodeProto | Fused]:
    """Returns the node list with fusable groups replaced by Fused records, in a valid execution order."""
    consumers = consumers_of(nodes)
    graph_out = set(outputs)

    groups: dict[int, Fused] = {}          # id(last node of group) -> group
    absorbed: set[int] = set()

    def sole_consumer(value: str) -> onnx.NodeProto | None:
        c = consumers.get(value, [])
        return c[0] if len(c) == 1 and value not in graph_out and id(c[0]) not in absorbed else None

    def free_consumers(value: str) -> list[onnx.NodeProto]:
        c = consumers.get(value, [])
        return [] if value in graph_out or any(id(x) in absorbed for x in c) else c

    for n in nodes:
        if n.op_type not in HEADS or len(n.output) != 1 or id(n) in absorbed:
            continue
        if n.op_type == "Gemm" and len(n.input) > 2 and n.input[2] and n.input[2] not in consts:
            continue
        y, group, last = n.output[0], Fused(n), n
        if n.op_type == "MatMul":
            if len(shapes.get(n.input[1], ())) < 2:   # a 1-D B drops N: no column to put a bias on
                continue
            add = sole_consumer(y)
            if add is not None and add.op_type == "Add":
                bias = _matmul_bias(n, add, shapes, consts)
                if bias is not None:
                    group.bias, y, last = bias, add.output[0], add
                    group.absorbed.append(add)
        add = sole_consumer(y)
        if add is not None and add.op_type == "Add":
            other = add.input[1] if add.input[0] == y else add.input[0]
            if other != y and other not in consts and shapes.get(other) == shapes.get(y) == shapes.get(add.output[0]):
                group.residual, y, last = other, add.output[0], add
                group.absorbed.append(add)
        gelu = gelu_erf_chain(y, free_consumers, consts)
        silu = None if gelu else silu_pair(y, free_consumers)
        act = None if gelu or silu else sole_consumer(y)
        if gelu and ACT_GELU in activations:
            group.activation, y, last = (ACT_GELU, []), gelu[-1].output[0], gelu[-1]
            group.absorbed.extend(gelu)
        elif silu and ACT_SILU in activations:
            group.activation, y, last = (ACT_SILU, []), silu[-1].output[0], silu[-1]
            group.absorbed.extend(silu)
        elif act is not None and len(act.output) == 1:
            spec = activation_of(act, consts, opset)
            if spec is not None and spec[0] in activations:
                group.activation, y, last = spec, act.output[0], act
                group.absorbed.append(act)
        if not group.absorbed:
            continue
        head = onnx.NodeProto()
        head.CopyFrom(n)
        head.output[0] = y
        group.head = head
        if n.op_type == "MatMul" or gelu or silu:   # more than one node after the head: the shipped graph's body
            group.chain = [n, *group.absorbed]
        groups[id(last)] = group
        absorbed.add(id(n))
        absorbed.update(id(a) for a in group.absorbed)
    out: list[onnx.NodeProto | Fused] = []
    for n in nodes:
        if id(n) in groups:
            out.append(groups[id(n)])
        elif id(n) not in absorbed:
            out.append(n)
    return out
