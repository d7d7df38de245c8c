"""Epilogue fusion: Conv/Gemm [+ residual Add] [+ activation] become one kernel node.

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

# Activation codes shared with wasm_kernels/src/kernels/activation.h
(ACT_NONE, ACT_RELU, ACT_LEAKY_RELU, ACT_CLIP, ACT_SIGMOID, ACT_HARDSIGMOID, ACT_HARDSWISH, ACT_TANH, ACT_GELU,
 ACT_GELU_TANH) = range(10)
HEADS = ("Conv", "Gemm")
# What the conv/gemm epilogues apply (gemm.h): relu/leaky_relu/clip in registers, the others through
# ep_apply_activation (the UNARY kernel's own code, so fused and unfused give the same bits).
EPILOGUE_ACTIVATIONS = frozenset(range(ACT_RELU, ACT_GELU_TANH + 1))


@dataclass
class Fused:
    head: onnx.NodeProto                   # the Conv/Gemm, with its output renamed to the group's output
    activation: tuple[int, list[float]] = (ACT_NONE, [])
    residual: str | None = None
    absorbed: list[onnx.NodeProto] = field(default_factory=list)


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


def fuse_epilogues(nodes: list[onnx.NodeProto], outputs: list[str], shapes: dict[str, tuple[int, ...]],
                   consts: dict[str, np.ndarray], opset: int,
                   activations: frozenset[int] = EPILOGUE_ACTIVATIONS) -> list[onnx.NodeProto | Fused]:
    """Returns the node list with fusable groups replaced by Fused records, in a valid execution order."""
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in nodes:
        for i in n.input:
            if i:
                consumers.setdefault(i, []).append(n)
    graph_out = set(outputs)

    groups: dict[int, Fused] = {}          # id(last node of group) -> group
    absorbed: set[int] = set()

    def sole_consumer(value: str) -> onnx.NodeProto | None:
        c = consumers.get(value, [])
        return c[0] if len(c) == 1 and value not in graph_out and id(c[0]) not in absorbed else None

    for n in nodes:
        if n.op_type not in HEADS or len(n.output) != 1 or id(n) in absorbed:
            continue
        if n.op_type == "Gemm" and len(n.input) > 2 and n.input[2] and n.input[2] not in consts:
            continue
        y, group, last = n.output[0], Fused(n), n
        add = sole_consumer(y)
        if add is not None and add.op_type == "Add":
            other = add.input[1] if add.input[0] == y else add.input[0]
            if other != y and other not in consts and shapes.get(other) == shapes.get(y) == shapes.get(add.output[0]):
                group.residual, group.absorbed, y, last = other, [add], add.output[0], add
        act = sole_consumer(y)
        if act is not None and len(act.output) == 1:
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
