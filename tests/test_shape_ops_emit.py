"""The plan v2 emitters of packager/ops/shape_ops.py: the parameter words they build from ONNX attributes and
opset rules (the kernels are tested in C: tests/test_dims_kernels.py)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from packager.analyze import Graph
from packager.lowering import LowerCtx
from packager.ops import shape_ops
from packager.plan.opcodes import Op

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def _ctx(opset: int, shapes: dict, dtypes: dict | None = None, consts: dict | None = None) -> LowerCtx:
    dtypes = {n: (dtypes or {}).get(n, F32) for n in shapes}
    model = helper.make_model(helper.make_graph([], "g", [], []))
    ctx = LowerCtx(Graph(model, opset, [], [], [], dict(shapes), dtypes, dict(consts or {})), dynamic={"x": {0}})
    ctx._current = "n"
    return ctx


def _emit(fn, ctx: LowerCtx, node: onnx.NodeProto):
    ctx._node = node
    fn(ctx, node)
    e = ctx.emitted[-1]
    return e.op, e.inputs, e.params


@pytest.mark.parametrize("opset,attrs,want", [
    (13, {"start": 1}, [0, 2**31 - 1]),            # before Shape-15: the whole shape
    (15, {}, [0, 2**31 - 1]),
    (15, {"start": 1, "end": -1}, [1, -1]),
    (19, {"start": -(2**40), "end": 2**40}, [-(2**31), 2**31 - 1]),   # int64 clamped to the words' range
])
def test_emit_shape(opset: int, attrs: dict, want: list[int]) -> None:
    ctx = _ctx(opset, {"x": (2, 3, 4), "s": (3,)}, {"s": I64})
    op, ins, params = _emit(shape_ops.emit_shape, ctx, helper.make_node("Shape", ["x"], ["s"], **attrs))
    assert (op, ins, params) == (Op.SHAPE, ["x"], want)


def test_emit_view_reshape() -> None:
    ctx = _ctx(14, {"x": (2, 3, 4), "t": (2,), "y": (6, 4)}, {"t": I64})
    op, ins, params = _emit(shape_ops.emit_view, ctx, helper.make_node("Reshape", ["x", "t"], ["y"], allowzero=1))
    assert (op, ins, params) == (Op.VIEW, ["x", "t"], [0, 1, 0])
    ctx = _ctx(13, {"x": (2, 3, 4), "t": (2,), "y": (6, 4)}, {"t": I64})   # allowzero is opset 14's
    assert _emit(shape_ops.emit_view, ctx, helper.make_node("Reshape", ["x", "t"], ["y"], allowzero=1))[2] == [0, 0, 0]
    ctx = _ctx(4, {"x": (2, 3, 4), "y": (6, 4)})   # opset < 5: the target attribute becomes an int64 weight
    op, ins, params = _emit(shape_ops.emit_view, ctx, helper.make_node("Reshape", ["x"], ["y"], shape=[-1, 4]))
    assert params == [0, 0, 0] and ins[0] == "x"
    w = ctx.tensors[ins[1]]
    assert np.frombuffer(w.data, np.int64).tolist() == [-1, 4] and w.shape == (2,)


@pytest.mark.parametrize("op_type,opset,attrs,axes,want", [
    ("Flatten", 13, {}, None, [1, 1, 0]),
    ("Flatten", 13, {"axis": -2}, None, [1, -2, 0]),
    ("Squeeze", 11, {"axes": [0, -1]}, None, [2, 0, 2, 0, -1]),
    ("Squeeze", 13, {}, [1], [2, 0, 1, 1]),
    ("Squeeze", 13, {}, None, [2, 0, 0]),          # no axes: every dim of extent 1, found at run time
    ("Unsqueeze", 11, {"axes": [0, 3]}, None, [3, 0, 2, 0, 3]),
    ("Unsqueeze", 13, {}, [-1], [3, 0, 1, -1]),
])
def test_emit_view_axes(op_type: str, opset: int, attrs: dict, axes: list | None, want: list[int]) -> None:
    consts = {"a": np.array(axes, np.int64)} if axes is not None else {}
    ctx = _ctx(opset, {"x": (1, 3, 1), "a": (len(axes or []),), "y": (3,)}, {"a": I64}, consts)
    inputs = ["x", "a"] if axes is not None else ["x"]
    op, ins, params = _emit(shape_ops.emit_view, ctx, helper.make_node(op_type, inputs, ["y"], **attrs))
    assert (op, ins, params) == (Op.VIEW, ["x"], want)


def test_emit_view_axes_fed_at_run_time() -> None:
    """Axes that are no constant go to VIEW as its second input (a value input: the kernel reads them), with no axis
    words; a float axes input is refused."""
    ctx = _ctx(13, {"x": (1, 3), "a": (1,), "y": (3,)}, {"a": I64})
    assert _emit(shape_ops.emit_view, ctx, helper.make_node("Squeeze", ["x", "a"], ["y"])) == (Op.VIEW, ["x", "a"], [shape_ops.VIEW_SQUEEZE, 0, 0])
    ctx = _ctx(13, {"x": (1, 3), "a": (1,), "y": (3,)}, {"a": F32})
    with pytest.raises(Exception, match="dtype"):
        _emit(shape_ops.emit_view, ctx, helper.make_node("Squeeze", ["x", "a"], ["y"]))


def test_emit_range() -> None:
    ctx = _ctx(11, {"s": (), "l": (), "d": (), "y": (5,)}, {n: I64 for n in "sldy"})
    assert _emit(shape_ops.emit_range, ctx, helper.make_node("Range", ["s", "l", "d"], ["y"])) == \
        (Op.RANGE, ["s", "l", "d"], [])
    ctx = _ctx(11, {"s": (), "l": (), "d": (), "y": (5,)}, {n: TensorProto.INT8 for n in "sldy"})
    with pytest.raises(Exception, match="dtype"):
        _emit(shape_ops.emit_range, ctx, helper.make_node("Range", ["s", "l", "d"], ["y"]))


@pytest.mark.parametrize("value,dtype,want", [
    (None, F32, [0, 0]),                                                       # ONNX's default: float32 0
    (helper.make_tensor("v", F32, [1], [1.5]), F32, [0x3FC00000, 0]),
    (helper.make_tensor("v", I64, [1], [-7]), I64, [-7, -1]),
    (helper.make_tensor("v", TensorProto.INT32, [1], [2**31 - 1]), TensorProto.INT32, [2**31 - 1, 0]),
    (helper.make_tensor("v", TensorProto.BOOL, [1], [True]), TensorProto.BOOL, [1, 0]),
])
def test_emit_constant_of_shape(value, dtype: int, want: list[int]) -> None:
    ctx = _ctx(9, {"s": (2,), "y": (2, 3)}, {"s": I64, "y": dtype})
    attrs = {"value": value} if value is not None else {}
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], **attrs)
    assert _emit(shape_ops.emit_constant_of_shape, ctx, node) == (Op.CONSTANT_OF_SHAPE, ["s"], want)


# -- lowerings of a dynamic plan: no word or alias derived from an extent known only at run time ----------------

def test_slice_of_a_dynamic_axis_keeps_its_onnx_words() -> None:
    from packager.ops.data import lower_slice
    node = helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])
    consts = {"s": np.array([0]), "e": np.array([4]), "a": np.array([0])}
    shapes = {"x": (4, 3), "y": (4, 3), "s": (1,), "e": (1,), "a": (1,)}
    ctx = _ctx(13, shapes, {"s": I64, "e": I64, "a": I64}, consts)   # axis 0 of x is dynamic: 0:4 may cut it
    assert _emit(lower_slice, ctx, node) == (Op.SLICE, ["x"], [0, 0, 4, 2**31 - 1, 1, 1])
    static = LowerCtx(ctx.graph)
    static._current = "n"
    static._node = node
    lower_slice(static, node)
    assert not static.emitted and static.tensors["y"].alias == "x"   # static: the whole tensor is the input's bytes


def test_split_without_sizes_is_equal_parts() -> None:
    from packager.ops.data import lower_split
    ctx = _ctx(13, {"x": (6, 2), "a": (2, 2), "b": (2, 2), "c": (2, 2)})
    assert _emit(lower_split, ctx, helper.make_node("Split", ["x"], ["a", "b", "c"]))[2] == [0, -1]
    ctx = _ctx(13, {"x": (6, 2), "sz": (3,), "a": (1, 2), "b": (2, 2), "c": (3, 2)}, {"sz": I64}, {"sz": np.array([1, 2, 3])})
    assert _emit(lower_split, ctx, helper.make_node("Split", ["x", "sz"], ["a", "b", "c"]))[2] == [0, 1, 2, 3]


def test_tile_of_a_dynamic_input_is_refused() -> None:
    from packager.ops.data import lower_tile
    ctx = _ctx(13, {"x": (2, 3), "r": (2,), "y": (4, 3)}, {"r": I64}, {"r": np.array([2, 1])})
    with pytest.raises(Exception, match="run time"):
        _emit(lower_tile, ctx, helper.make_node("Tile", ["x", "r"], ["y"]))
