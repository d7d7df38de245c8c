"""Ops whose output extent depends on the input's values: NonZero, NonMaxSuppression, Unique (docs/plan-format.md,
"Data-dependent output dims"). The plan gives each such output its capacity (the largest extent the op can
produce for those input shapes); the kernel sets the actual extent when it runs and the core re-derives the dims
after it. Here: the capacities (analyze pins them so that shape inference fills in the graph downstream) and the
graph's shapes at capacity + 1, a second probe whose differences are the dims resolved at run time."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, shape_inference

OPS = frozenset({"NonZero", "NonMaxSuppression", "Unique"})


def nms_per_class(node: onnx.NodeProto, consts: dict, boxes: int) -> int:
    """Rows kept per batch and class at most: a constant max_output_boxes_per_class (absent: 0), else the box count."""
    name = node.input[2] if len(node.input) > 2 else ""
    if not name:
        return 0
    if name not in consts:
        return boxes
    return int(min(max(int(np.asarray(consts[name]).reshape(-1)[0]), 0), boxes))


def capacities(node: onnx.NodeProto, shapes: dict, consts: dict) -> dict[str, tuple[tuple[int, ...], set[int]]]:
    """Output name -> (capacity shape, the axes the run sets); {} when an input's shape is unknown."""
    if any(i and i not in shapes for i in node.input[:2]):
        return {}
    x = tuple(shapes[node.input[0]])
    if node.op_type == "NonZero":
        return {node.output[0]: ((max(len(x), 1), int(np.prod(x, dtype=np.int64))), {1})}
    if node.op_type == "NonMaxSuppression":
        s = tuple(shapes[node.input[1]])
        if len(x) != 3 or len(s) != 3:
            return {}
        return {node.output[0]: ((s[0] * s[1] * nms_per_class(node, consts, x[1]), 3), {0})}
    axis = next((a.i for a in node.attribute if a.name == "axis"), None)
    if axis is not None and not -len(x) <= axis < len(x):
        return {}
    n = int(np.prod(x, dtype=np.int64)) if axis is None else x[axis]
    y = (n,) if axis is None else x
    out = {}
    for k, (shape, axes) in enumerate([(y, {0 if axis is None else axis % len(x)}), ((n,), {0}), ((n,), set()),
                                       ((n,), {0})]):
        if k < len(node.output) and node.output[k]:
            out[node.output[k]] = (tuple(shape), axes)
    return out


def downstream(g: onnx.GraphProto) -> set[str]:
    """The values computed from a data-dependent output (node order is topological): their dims may follow the
    count, so no Shape / Size of them is folded at package time."""
    out: set[str] = set()
    for node in g.node:
        if (node.op_type in OPS and node.domain in ("", "ai.onnx")) or any(i in out for i in node.input):
            out.update(o for o in node.output if o)
    return out


def pin(model: onnx.ModelProto, shapes: dict, consts: dict, extra: int = 0) -> dict[str, set[int]]:
    """Give the data-dependent outputs of `model` their capacity (+ extra on the axes the run sets) as value_info,
    so that shape inference carries them downstream. Returns output -> the axes the run sets."""
    g = model.graph
    dtypes = {vi.name: vi.type.tensor_type.elem_type for vi in [*g.input, *g.value_info, *g.output]}
    dtypes.update({t.name: t.data_type for t in g.initializer})
    axes: dict[str, set[int]] = {}
    pinned = []
    for node in g.node:
        if node.op_type not in OPS or node.domain not in ("", "ai.onnx"):
            continue
        for name, (shape, ax) in capacities(node, shapes, consts).items():
            shape = tuple(d + extra if i in ax else d for i, d in enumerate(shape))
            dt = dtypes.get(node.input[0], 0) if node.op_type == "Unique" and name == node.output[0] else \
                onnx.TensorProto.INT64
            pinned.append(helper.make_tensor_value_info(name, dt, shape))
            axes[name] = ax
    names = {vi.name: vi for vi in pinned}
    keep = [vi for vi in g.value_info if vi.name not in names]
    del g.value_info[:]
    g.value_info.extend(keep + [vi for vi in pinned if vi.name not in {o.name for o in g.output}])
    for vi in g.output:   # a pinned graph output takes its pin there (it rules over value_info); declared
        if vi.name in names:   # symbolic dims (the counts) are inferred from the pins instead
            vi.type.CopyFrom(names[vi.name].type)
        elif not all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim):
            vi.type.tensor_type.ClearField("shape")
    return axes


def probe_shapes(model: onnx.ModelProto, shapes: dict, consts: dict) -> dict[str, tuple[int, ...]]:
    """Every static shape of the graph with the data-dependent outputs at capacity + 1: what differs from the
    capacity's shapes is resolved at run time."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.value_info[:]
    for vi in m.graph.output:   # inferred again from the pins
        vi.type.tensor_type.ClearField("shape")
    pin(m, shapes, consts, extra=1)
    m = shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)
    out = {}
    for vi in [*m.graph.value_info, *m.graph.output]:
        dims = vi.type.tensor_type.shape.dim
        if vi.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            out[vi.name] = tuple(d.dim_value for d in dims)
    return out
