"""Ops that only reinterpret bytes: no kernel runs, the output aliases the input's memory."""
from __future__ import annotations

import onnx

from ..lower import LowerCtx, lowers


@lowers("Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Dropout")
def lower_view(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    if node.op_type == "Dropout":
        a = ctx.attrs(node)
        if len(node.input) > 2 and node.input[2]:
            training = ctx.require_const(node, node.input[2])[0]
            if bool(training):
                raise ctx.unsupported(node, "training_mode=true is not inference")
        if len(node.output) > 1 and node.output[1]:
            raise ctx.unsupported(node, "the mask output is training-only")
        if a.get("is_test", 1) == 0 and ctx.opset < 7:
            raise ctx.unsupported(node, "is_test=0")
    if node.op_type == "Reshape" and len(node.input) > 1:
        ctx.require_const(node, node.input[1])   # shape is fixed at package time
    if node.op_type in ("Squeeze", "Unsqueeze") and len(node.input) > 1 and node.input[1]:
        ctx.require_const(node, node.input[1])
    if ctx.shape(node.output[0]) and ctx.dtype(node.input[0]) != ctx.dtype(node.output[0]):
        raise ctx.unsupported(node, "input and output dtypes differ")
    ctx.dtype(node.input[0])   # refuses dtypes the runtime cannot hold
    ctx.alias(node.output[0], node.input[0])
