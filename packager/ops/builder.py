"""Lowerings written as small ONNX graphs: each ONNX op on temporaries lowered by its own registered lowering
(shapes computed here), and package-time constants that other lowerings read as graph initializers. Used by the
rewrites of packager/ops/spectral.py, sampling.py, detection.py and pool_indices.py."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ..lowering import REGISTRY, LowerCtx


def const_weight(ctx: LowerCtx, array: np.ndarray, hint: str) -> str:
    """A package-time constant that other lowerings (MatMul, Conv, ...) read as they read a graph initializer."""
    name = ctx.weight(array, hint)
    ctx.graph.consts[name] = array
    return name


class Builder:
    """ONNX ops on temporaries, each lowered by its registered lowering (shapes computed here)."""

    def __init__(self, ctx: LowerCtx, node: onnx.NodeProto) -> None:
        self.ctx, self.tag, self.k = ctx, node.name or node.output[0], 0

    def const(self, value, dtype: type = np.float32) -> str:
        return const_weight(self.ctx, np.asarray(value, dtype), "const")

    def op(self, op_type: str, inputs: list[str], shape, dtype: type = np.float32, out: str | None = None,
           **attrs) -> str:
        self.k += 1
        out = out or self.ctx.temp(tuple(int(d) for d in shape), dtype, f"{op_type.lower()}_")
        REGISTRY[op_type](self.ctx, helper.make_node(op_type, inputs, [out], name=f"{self.tag}/{op_type}{self.k}",
                                                     **attrs))
        return out

    def bin(self, op_type: str, a: str, b: str | float) -> str:
        b = self.const(b) if isinstance(b, float) else b
        return self.op(op_type, [a, b], np.broadcast_shapes(self.ctx.shape(a), self.ctx.shape(b)))

    def un(self, op_type: str, a: str) -> str:
        return self.op(op_type, [a], self.ctx.shape(a))

    def clip(self, a: str, lo: float, hi: float) -> str:
        return self.op("Clip", [a, self.const(lo), self.const(hi)], self.ctx.shape(a))

    def affine(self, a: str, mul: float, add: float) -> str:
        return self.bin("Add", self.bin("Mul", a, mul), add)

    def reduce(self, op_type: str, a: str, axes: list[int]) -> str:
        """keepdims=0 over axes: an input from opset 13 (ReduceSum) or 18 (the others), an attribute before."""
        shape = [d for i, d in enumerate(self.ctx.shape(a)) if i not in axes]
        if self.ctx.opset >= (13 if op_type == "ReduceSum" else 18):
            return self.op(op_type, [a, self.const(axes, np.int64)], shape, keepdims=0)
        return self.op(op_type, [a], shape, keepdims=0, axes=axes)
