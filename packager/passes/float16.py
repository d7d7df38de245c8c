"""float16 models (torch `.half()` exports, onnxconverter_common's convert_float_to_float16, transformers.js'
model_fp16.onnx) computed in float32: every float16 value of the graph becomes float32 (initializers widened
exactly, ConstantOfShape / Constant / dtype attributes retargeted, a Cast to float16 followed by one back to float32:
the rounding the model asks for stays), and the graph's float16 inputs and
outputs stay the user's interface through one CAST at each edge. The kernels then run their float32 paths on the
whole graph (no CAST pair around every node), and the answer is the float16 model's computed without float16's
rounding between ops. Whether the weights ship as float16 again is the caller's choice (packager/front.py)."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from .. import weights
from .subgraphs import all_graphs, rename_reads, subgraphs

F16, F32 = TensorProto.FLOAT16, TensorProto.FLOAT
_DTYPE_ATTRS = ("to", "dtype")   # Cast; EyeLike, RandomNormal(Like), RandomUniform(Like), Bernoulli


def _float16_model(m: onnx.ModelProto) -> bool:
    """float16 weights or a float16 input / output: a float16 model. A float32 model that casts some values to
    float16 keeps its float16 ops as they are (computed through float32 copies, rounded after each op)."""
    g = m.graph
    return any(vi.type.tensor_type.elem_type == F16 for vi in [*g.input, *g.output]) or \
        any(t.data_type == F16 for gg in all_graphs(g) for t in gg.initializer)


def _widen_tensor(t: onnx.TensorProto) -> None:
    t.CopyFrom(weights.from_array(weights.to_array(t).astype(np.float32), t.name))


def _retype(vis) -> None:
    for vi in vis:
        if vi.type.tensor_type.elem_type == F16:
            vi.type.tensor_type.elem_type = F32


def _rename_uses(g: onnx.GraphProto, old: str, new: str) -> None:
    """Every read of `old` in g's nodes and in the subgraphs reading it from outside."""
    for n in g.node:
        n.input[:] = [new if x == old else x for x in n.input]
        for s in subgraphs(n):
            rename_reads(s, {old: new})


def widen_float16(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """(the model computed in float32, how many float16 initializers were widened); the model itself when it is
    not a float16 model (_float16_model). External-data initializers must be loaded (packager/model_load.py does)."""
    if not _float16_model(model):
        return model, 0
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    widened = 0
    for gg in all_graphs(g):
        for t in gg.initializer:
            if t.data_type == F16:
                _widen_tensor(t)
                widened += 1
        _retype(gg.value_info)
        if gg is not g:   # a body's formal inputs and outputs are internal values
            _retype(gg.input)
            _retype(gg.output)
        nodes = []
        for n in gg.node:
            nodes.append(n)
            for a in n.attribute:
                if n.op_type == "Cast" and a.name == "to" and a.i == F16:   # the model asks for float16's rounding
                    wide = helper.make_node("Cast", [f"{n.output[0]}::f16"], [n.output[0]], to=F32,
                                            name=f"{n.name or n.output[0]}::widen")
                    n.output[0] = wide.input[0]
                    nodes.append(wide)
                elif a.name in _DTYPE_ATTRS and a.type == onnx.AttributeProto.INT and a.i == F16:
                    a.i = F32
                elif a.type == onnx.AttributeProto.TENSOR and a.t.data_type == F16:
                    _widen_tensor(a.t)
        del gg.node[:]
        gg.node.extend(nodes)
    inits = {t.name for t in g.initializer}
    first, last = [], []
    for vi in g.input:
        if vi.name in inits:   # an input with a default (an initializer, widened above)
            _retype([vi])
        elif vi.type.tensor_type.elem_type == F16:
            inner = f"{vi.name}::f32"
            _rename_uses(g, vi.name, inner)
            first.append(helper.make_node("Cast", [vi.name], [inner], to=F32, name=f"{vi.name}::to_f32"))
    inputs = {vi.name for vi in g.input}
    for vi in g.output:
        if vi.type.tensor_type.elem_type != F16 or vi.name in inputs:   # an input returned as it is stays float16
            continue
        inner = f"{vi.name}::f32"
        _rename_uses(g, vi.name, inner)
        for t in [*g.initializer, *g.value_info]:
            t.name = inner if t.name == vi.name else t.name
        for n in g.node:
            n.output[:] = [inner if o == vi.name else o for o in n.output]
        last.append(helper.make_node("Cast", [inner], [vi.name], to=F16, name=f"{vi.name}::to_f16"))
    nodes = [*first, *g.node, *last]
    del g.node[:]
    g.node.extend(nodes)
    return m, widened
