"""Plan v2 emitters for the ops whose output dims are known only at run time: Shape -> SHAPE,
Reshape/Flatten/Squeeze/Unsqueeze -> VIEW, Range -> RANGE, ConstantOfShape -> CONSTANT_OF_SHAPE
(docs/plan-format.md, "Plan v2 kernels"). ONNX attributes and opset rules are resolved here into the kernels'
parameter words; the kernels resolve what depends on the dims (negative indices, clamping, -1, 0) at run time.

Registered by no @lowers: the v2 lowering calls them where an op's shape is not static."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from ..lowering import LowerCtx
from ..plan.opcodes import MAX_RANK, Op
from .data import DATA_DTYPES, _value_words
from .view_modes import VIEW_FLATTEN, VIEW_RESHAPE, VIEW_SQUEEZE, VIEW_UNSQUEEZE

INT32_MIN, INT32_MAX = -2**31, 2**31 - 1


def _i32(v: int) -> int:
    """An ONNX int64 index as a parameter word: clamped (ranks and extents are far below 2^31)."""
    return min(max(int(v), INT32_MIN), INT32_MAX)


def _axes(ctx: LowerCtx, node: onnx.NodeProto) -> list[int]:
    """Squeeze/Unsqueeze axes: the attribute before opset 13, the (constant) second input from 13 on."""
    if ctx.opset < 13:
        return [int(a) for a in ctx.attrs(node).get("axes", [])]
    if len(node.input) > 1 and node.input[1]:
        return [int(a) for a in np.asarray(ctx.require_const(node, node.input[1])[0]).reshape(-1)]
    return []


def emit_shape(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """Shape (start/end from opset 15; before, the whole shape): SHAPE [start, end], normalized by the kernel."""
    a = ctx.attrs(node) if ctx.opset >= 15 else {}
    ctx.emit(Op.SHAPE, [node.input[0]], [node.output[0]], [_i32(a.get("start", 0)), _i32(a.get("end", INT32_MAX))])


def emit_view(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """Reshape, Flatten, Squeeze, Unsqueeze: VIEW [mode, a, n_axes, axes...] (same bytes, dims resolved at run time)."""
    x, y = node.input[0], node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [x, y])
    ins = [x]
    if node.op_type == "Reshape":
        a = ctx.attrs(node)
        if ctx.opset < 5:   # the target is an attribute: stored as the int64 input the kernel reads
            ins.append(ctx.weight(np.array(a["shape"], np.int64), "reshape"))
        else:
            ins.append(node.input[1])
        params = [VIEW_RESHAPE, int(a.get("allowzero", 0)) if ctx.opset >= 14 else 0, 0]
    elif node.op_type == "Flatten":
        params = [VIEW_FLATTEN, int(ctx.attrs(node).get("axis", 1)), 0]
    elif node.op_type in ("Squeeze", "Unsqueeze") and ctx.opset >= 13 and len(node.input) > 1 and node.input[1] \
            and ctx.const(node.input[1]) is None:   # axes fed at run time: the kernel reads their values
        ctx.check_dtypes(node, [np.int64], [node.input[1]])
        ins.append(node.input[1])
        params = [VIEW_SQUEEZE if node.op_type == "Squeeze" else VIEW_UNSQUEEZE, 0, 0]
    elif node.op_type in ("Squeeze", "Unsqueeze"):
        axes = _axes(ctx, node)
        if len(axes) > MAX_RANK:
            raise ctx.unsupported(node, f"{len(axes)} axes")
        mode = VIEW_SQUEEZE if node.op_type == "Squeeze" else VIEW_UNSQUEEZE
        params = [mode, 0, len(axes), *(_i32(v) for v in axes)]
    else:
        raise ctx.unsupported(node, "not a view op")
    ctx.emit(Op.VIEW, ins, [y], params)


def emit_range(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """Range(start, limit, delta): RANGE, no params."""
    ctx.check_dtypes(node, (np.int32, np.int64, np.float32), [*node.input[:3], node.output[0]])
    ctx.emit(Op.RANGE, list(node.input[:3]), [node.output[0]], [])


def emit_constant_of_shape(ctx: LowerCtx, node: onnx.NodeProto) -> None:
    """ConstantOfShape(shape): CONSTANT_OF_SHAPE [value_lo, value_hi], the value's bytes in the output's dtype
    (default: float32 0)."""
    y = node.output[0]
    ctx.check_dtypes(node, DATA_DTYPES, [y])
    value = ctx.attrs(node).get("value")
    v = numpy_helper.to_array(value).reshape(-1) if value is not None else np.zeros(1, np.float32)
    if v.size != 1:
        raise ctx.unsupported(node, f"value has {v.size} elements, not 1")
    ctx.emit(Op.CONSTANT_OF_SHAPE, [node.input[0]], [y], list(_value_words(ctx.dtype(y), v[0])))
