"""Each optimizer pass on its own: node count before/after, and onnxruntime gives the same outputs on the
graph before and after it (so a pass that changes the math fails here, not only in the model tests)."""
from __future__ import annotations

from collections import Counter
from typing import Callable

import numpy as np
import onnx
import onnx.inliner
import onnx_ir as ir
import pytest
from onnx import helper, numpy_helper

from packager.reference import reference_run
from packager.passes.cleanup import eliminate_identity, remove_dead
from packager.passes.fold_batchnorm import fold_batchnorm
from packager.passes.matmul_gemm import matmul_add_to_gemm
from packager.passes.reshape import collapse_reshapes
from packager.passes.scale import hoist_matmul_scale
from packager.passes.strip import strip_proto, strip_training
from packager.passes.transpose import eliminate_transposes

from .conftest import f32, make_model

RNG = np.random.default_rng(0)


def _w(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def _i64(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _apply(fn: Callable[[ir.Model], object], model: onnx.ModelProto) -> tuple[onnx.ModelProto, Counter, Counter]:
    """Run one pass; check onnxruntime agrees before/after; return the new model and op counts."""
    m = ir.serde.deserialize_model(model)
    fn(m)
    out = ir.serde.serialize_model(m)
    onnx.checker.check_model(out)
    feeds = {i.name: RNG.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}}
    want, got = reference_run(model, feeds), reference_run(out, feeds)
    assert want.keys() == got.keys()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-5, err_msg=k)
    return out, Counter(n.op_type for n in model.graph.node), Counter(n.op_type for n in out.graph.node)


def test_identity_and_inference_dropout_removed_outputs_keep_names() -> None:
    nodes = [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Dropout", ["b", "ratio"], ["c"]),
             helper.make_node("Dropout", ["c", "ratio", "off"], ["d", "mask"]),
             helper.make_node("Identity", ["d"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "ratio"), numpy_helper.from_array(np.array(False), "off")]
    model = make_model(nodes, [f32("x", [2, 3])], [f32("y", [2, 3])], inits, opset=13)
    out, before, after = _apply(eliminate_identity, model)
    assert sum(before.values()) == 5 and after == Counter({"Relu": 1})
    assert [o.name for o in out.graph.output] == ["y"]


def test_dropout_whose_mask_is_read_stays() -> None:
    nodes = [helper.make_node("Dropout", ["x"], ["d", "mask"]), helper.make_node("Cast", ["mask"], ["m"], to=1),
             helper.make_node("Add", ["d", "m"], ["y"])]
    model = make_model(nodes, [f32("x", [4])], [f32("y", [4])], opset=13)
    _, before, after = _apply(eliminate_identity, model)
    assert before == after


def test_dead_nodes_and_unused_initializers_removed() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Add", ["x", "w"], ["dead1"]),
             helper.make_node("Neg", ["dead1"], ["dead2"])]
    model = make_model(nodes, [f32("x", [3])], [f32("y", [3])], [_w("w", 3), _w("unused", 5)])
    out, before, after = _apply(remove_dead, model)
    assert sum(before.values()) == 3 and after == Counter({"Relu": 1})
    assert len(out.graph.initializer) == 0


@pytest.mark.parametrize("head", ["Conv", "ConvTranspose", "Gemm"])
def test_batchnorm_folded_into_head(head: str) -> None:
    c = 4
    bn = [_w("g", c), _w("be", c), _w("mu", c), numpy_helper.from_array(RNG.uniform(0.5, 2, c).astype(np.float32), "var")]
    if head == "Gemm":
        node = helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1)
        inits, xs, ys = [_w("w", c, 6), _w("b", c)], [2, 6], [2, c]
    elif head == "Conv":
        node = helper.make_node("Conv", ["x", "w", "b"], ["h"], pads=[1, 1, 1, 1])
        inits, xs, ys = [_w("w", c, 3, 3, 3), _w("b", c)], [1, 3, 5, 5], [1, c, 5, 5]
    else:
        node = helper.make_node("ConvTranspose", ["x", "w"], ["h"], strides=[2, 2], group=1)
        inits, xs, ys = [_w("w", 3, c, 2, 2)], [1, 3, 4, 4], [1, c, 8, 8]
    nodes = [node, helper.make_node("BatchNormalization", ["h", "g", "be", "mu", "var"], ["y"], epsilon=1e-3)]
    model = make_model(nodes, [f32("x", xs)], [f32("y", ys)], inits + bn)
    _, before, after = _apply(fold_batchnorm, model)
    assert before["BatchNormalization"] == 1 and after == Counter({head: 1})


def test_training_mode_batchnorm_not_folded() -> None:
    c = 4
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"]),
             helper.make_node("BatchNormalization", ["h", "g", "be", "mu", "var"], ["y"], training_mode=1)]
    inits = [_w("w", c, 3, 1, 1), _w("g", c), _w("be", c), _w("mu", c),
             numpy_helper.from_array(np.ones(c, np.float32), "var")]
    m = ir.serde.deserialize_model(make_model(nodes, [f32("x", [2, 3, 4, 4])], [f32("y", [2, c, 4, 4])], inits))
    fold_batchnorm(m)
    assert [n.op_type for n in m.graph] == ["Conv", "BatchNormalization"]


def test_matmul_add_to_gemm_only_when_gemm_can_express_it() -> None:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["b", "m"], ["y"])]
    model = make_model(nodes, [f32("x", [3, 5])], [f32("y", [3, 4])], [_w("w", 5, 4), _w("b", 4)])
    _, before, after = _apply(matmul_add_to_gemm, model)
    assert sum(before.values()) == 2 and after == Counter({"Gemm": 1})
    # 3-D operand, or a bias that broadcasts the result up to rank 3: Gemm cannot, nothing changes
    model = make_model(nodes, [f32("x", [2, 3, 5])], [f32("y", [2, 3, 4])], [_w("w", 5, 4), _w("b", 4)])
    assert _apply(matmul_add_to_gemm, model)[2] == Counter({"MatMul": 1, "Add": 1})
    model = make_model(nodes, [f32("x", [3, 5])], [f32("y", [2, 3, 4])], [_w("w", 5, 4), _w("b", 2, 1, 4)])
    assert _apply(matmul_add_to_gemm, model)[2] == Counter({"MatMul": 1, "Add": 1})


def _scale_inputs(model: onnx.ModelProto) -> list[list[str]]:
    out, _, _ = _apply(hoist_matmul_scale, onnx.shape_inference.infer_shapes(model))
    return [list(n.input) for n in out.graph.node if n.op_type in ("Mul", "Div")]


def test_scalar_scale_moves_onto_the_smaller_or_constant_operand() -> None:
    # attention's scores: scale Q (2x40x8), not the 2x40x40 product; either Mul operand order
    for order in (["s", "m"], ["m", "s"]):
        nodes = [helper.make_node("MatMul", ["q", "k"], ["m"]), helper.make_node("Mul", order, ["y"])]
        model = make_model(nodes, [f32("q", [2, 40, 8]), f32("k", [2, 8, 40])], [f32("y", [2, 40, 40])],
                           [numpy_helper.from_array(np.array(0.125, np.float32), "s")])
        assert _scale_inputs(model) in ([["q", "s"]], [["s", "q"]])
    # a constant operand takes it (analysis folds it into the weights), even where x is smaller
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Div", ["m", "d"], ["y"])]
    model = make_model(nodes, [f32("x", [3, 5])], [f32("y", [3, 40])], [_w("w", 5, 40), _w("d", 1, 1)])
    assert _scale_inputs(model) == [["w", "d"]]
    # nothing to gain (P*V: P 40x40, V 40x8 as large as the product), a scale per column, or c of higher rank
    cases = [([2, 40, 40], [2, 40, 8], [1]), ([40, 8], [8, 40], [40]), ([40, 8], [8, 40], [1, 1, 1])]
    for sa, sb, sc in cases:
        nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Mul", ["m", "c"], ["y"])]
        y = list(np.broadcast_shapes((*sa[:-1], sb[-1]), tuple(sc)))
        model = make_model(nodes, [f32("a", sa), f32("b", sb)], [f32("y", y)], [_w("c", *sc)])
        assert _scale_inputs(model) == [["m", "c"]], (sa, sb, sc)


def test_transposes_cancel_and_move_through_elementwise() -> None:
    p, q = [0, 2, 3, 1], [0, 3, 1, 2]   # q undoes p
    nodes = [helper.make_node("Transpose", ["x"], ["t1"], perm=p), helper.make_node("Relu", ["t1"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t2"], perm=q),           # T_q(relu(T_p(x))) = relu(x)
             helper.make_node("Transpose", ["t2"], ["a"], perm=p), helper.make_node("Transpose", ["z"], ["b"], perm=p),
             helper.make_node("Add", ["a", "b"], ["s"]),                     # one transpose after the Add instead
             helper.make_node("Transpose", ["s"], ["u"], perm=[0, 1, 3, 2]),
             helper.make_node("Transpose", ["u"], ["y"], perm=[0, 1, 3, 2])]  # inverse pair
    model = make_model(nodes, [f32("x", [1, 2, 3, 4]), f32("z", [1, 2, 3, 4])], [f32("y", [1, 3, 4, 2])])
    _, before, after = _apply(eliminate_transposes, model)
    assert before["Transpose"] == 6 and after == Counter({"Relu": 1, "Add": 1, "Transpose": 1})


def test_reshape_chain_collapses_to_one_reshape() -> None:
    nodes = [helper.make_node("Flatten", ["x"], ["f"], axis=1), helper.make_node("Reshape", ["f", "s"], ["r"]),
             helper.make_node("Unsqueeze", ["r", "ax"], ["u"]), helper.make_node("Relu", ["u"], ["y"]),
             helper.make_node("Squeeze", ["u", "ax"], ["v"]), helper.make_node("Reshape", ["v", "s2"], ["z"])]
    model = make_model(nodes, [f32("x", [2, 3, 4])], [f32("y", [6, 4, 1]), f32("z", [24])],
                       [_i64("s", [6, 4]), _i64("ax", [2]), _i64("s2", [-1])], opset=13)
    model = onnx.shape_inference.infer_shapes(model)
    out, before, after = _apply(collapse_reshapes, model)
    # 'u' has two readers: Flatten-Reshape-Unsqueeze collapse, Squeeze-Reshape after it collapse separately
    assert sum(before.values()) == 6 and after == Counter({"Reshape": 2, "Relu": 1})


def test_strip_removes_docs_metadata_training_info_and_training_dropout() -> None:
    nodes = [helper.make_node("Dropout", ["x", "r", "on"], ["d"], doc_string="drop"),
             helper.make_node("Relu", ["d"], ["y"], doc_string="relu")]
    model = make_model(nodes, [f32("x", [3])], [f32("y", [3])],
                       [numpy_helper.from_array(np.array(0.5, np.float32), "r"),
                        numpy_helper.from_array(np.array(True), "on")], opset=13)
    model.doc_string = "a model"
    helper.set_model_props(model, {"author": "someone"})
    model.training_info.add()
    model.graph.value_info.append(f32("gone", [3]))
    kept = onnx.ModelProto()
    kept.CopyFrom(model)
    assert strip_proto(kept, keep_metadata=True) == {"training_info": 1, "unused_value_info": 1}
    assert kept.doc_string == "a model" and len(kept.metadata_props) == 1
    stripped = strip_proto(model)
    assert stripped == {"training_info": 1, "unused_value_info": 1, "doc_strings": 3, "metadata_props": 1}
    assert not model.doc_string and not any(n.doc_string for n in model.graph.node)
    assert strip_training(model) == ["d"]
    m = ir.serde.deserialize_model(model)
    eliminate_identity(m)
    assert [n.op_type for n in m.graph] == ["Relu"]


def test_fuse_graph_functions_are_valid_onnx_that_onnxruntime_runs() -> None:
    """Gemm+LeakyRelu (both have `alpha`: the activation's becomes act_alpha), Clip with only a max bound,
    and the same Conv+Relu pattern called with different attributes present (the function declares their union)."""
    from packager.analyze import analyze
    from packager.passes.fuse_graph import DOMAIN, fuse_graph
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="c1"),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], strides=[2, 2], name="c2"),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], name="c3"),
             helper.make_node("Clip", ["c3", "", "hi"], ["k"]),
             helper.make_node("Flatten", ["k"], ["f"]),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["g"], alpha=0.5, transB=1, name="g"),
             helper.make_node("LeakyRelu", ["g"], ["y"], alpha=0.2)]
    inits = [_w("w1", 4, 3, 3, 3), _w("b1", 4), _w("w2", 4, 4, 1, 1), _w("b2", 4), _w("w3", 2, 4, 1, 1), _w("b3", 2),
             numpy_helper.from_array(np.array(0.5, np.float32), "hi"), _w("wg", 5, 18), _w("bg", 5)]
    model = make_model(nodes, [f32("x", [1, 3, 6, 6])], [f32("y", [1, 5])], inits, opset=17)
    g = analyze(model)
    fused = onnx.ModelProto()
    fused.CopyFrom(g.model)
    assert fuse_graph(fused, g.shapes, g.consts, g.opset) == 4
    onnx.checker.check_model(fused, full_check=True)
    assert [(n.domain, n.op_type) for n in fused.graph.node] == [
        (DOMAIN, "Conv_Relu"), (DOMAIN, "Conv_Relu"), (DOMAIN, "Conv_Clip"), ("", "Flatten"), (DOMAIN, "Gemm_LeakyRelu")]
    conv_relu = next(f for f in fused.functions if f.name == "Conv_Relu")
    assert {"pads", "strides"} <= set(conv_relu.attribute)
    gemm = fused.graph.node[-1]
    assert {a.name: helper.get_attribute_value(a) for a in gemm.attribute} == pytest.approx(
        {"alpha": 0.5, "transB": 1, "act_alpha": 0.2})
    feeds = {"x": RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)}
    np.testing.assert_allclose(reference_run(fused, feeds)["y"], reference_run(model, feeds)["y"], rtol=1e-6, atol=1e-6)
    inlined = onnx.inliner.inline_local_functions(fused)
    assert Counter(n.op_type for n in inlined.graph.node) == Counter(n.op_type for n in model.graph.node)
