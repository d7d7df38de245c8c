"""Ops that only reinterpret bytes: the output aliases the input's memory. No kernel runs when the dims are
fixed; where they are resolved at run time (plan version 2) a VIEW node computes the output's dims, still on the
input's bytes. Shape, Range and ConstantOfShape, folded when the input shapes are fixed, run in the core then."""
from __future__ import annotations

import onnx

from ..lowering import LowerCtx, lowers
from ..plan.opcodes import Op
from .shape_ops import VIEW_UNSQUEEZE, emit_constant_of_shape, emit_range, emit_shape, emit_view


def _runtime_view(ctx: LowerCtx, node: onnx.NodeProto) -> bool:
    """Whether this view's output dims are only known at run time."""
    if not ctx.dynamic:
        return False
    x, y = node.input[0], node.output[0]
    target = node.input[1] if node.op_type in ("Reshape", "Squeeze", "Unsqueeze") and len(node.input) > 1 else ""
    return not (ctx.fixed(x) and ctx.fixed(y)) or bool(target and ctx.const(target) is None)


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
    if _runtime_view(ctx, node):
        x, y = node.input[0], node.output[0]
        if ctx.const(x) is None:   # same bytes: VIEW only resolves the dims (a weight's view gets its own copy)
            ctx.alias(y, x)
        if node.op_type in ("Identity", "Dropout"):
            ctx.emit(Op.VIEW, [x], [y], [VIEW_UNSQUEEZE, 0, 0])   # no new axis: the input's dims
        else:
            emit_view(ctx, node)
        return
    if node.op_type == "Reshape" and len(node.input) > 1:
        ctx.require_const(node, node.input[1])   # shape is fixed at package time
    if node.op_type in ("Squeeze", "Unsqueeze") and len(node.input) > 1 and node.input[1]:
        ctx.require_const(node, node.input[1])
    if ctx.shape(node.output[0]) and ctx.dtype(node.input[0]) != ctx.dtype(node.output[0]):
        raise ctx.unsupported(node, "input and output dtypes differ")
    ctx.dtype(node.input[0])   # refuses dtypes the runtime cannot hold
    ctx.alias(node.output[0], node.input[0])


@lowers("Shape")
def lower_shape(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """Left in the graph only when it varies with the input shapes (packager/dynamic.py): SHAPE, run while
    resolving shapes."""
    emit_shape(ctx, node)


@lowers("Range", "ConstantOfShape")
def lower_shaped_by_values(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """Their output dims come from input values: those must be shape arithmetic of a run-time-shaped plan
    (known while resolving); computed from the input data, they are refused (packager/plan/dynamic.py)."""
    if not ctx.dynamic:
        raise ctx.unsupported(node, "its output shape depends on values known only at run time (from the input "
                                    "data): not supported")
    (emit_range if node.op_type == "Range" else emit_constant_of_shape)(ctx, node)
