"""Standard ONNX ops without an edgepack lowering, expanded into the function bodies onnx defines for them
(packager/passes/expand_functions.py): packaged, run by the wasm SIMD build under wasmtime, compared with
onnxruntime CPU (onnx.reference where onnxruntime lacks the opset)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.errors import PackagerError
from packager.passes.expand_functions import expand_functions

TOL = 1e-4
RNG = np.random.default_rng(1)


def _f(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _vi(name: str, shape, dt=TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dt, shape)


def _model(nodes, inputs, outputs, inits=(), opset: int = 23) -> onnx.ModelProto:
    m = helper.make_model(helper.make_graph(nodes, "fn", inputs, outputs, list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def _reference(model: onnx.ModelProto, feeds: dict) -> dict[str, np.ndarray]:
    try:
        s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))
    except Exception:  # noqa: BLE001 - an opset onnxruntime does not implement yet: onnx's reference
        from onnx.reference import ReferenceEvaluator
        return dict(zip([o.name for o in model.graph.output], ReferenceEvaluator(model).run(None, feeds)))


def check(model: onnx.ModelProto, feeds: dict, tmp_path, expanded: str | None) -> None:
    """expanded: the op replaced by its function body; None: an op with a lowering of its own, never expanded."""
    _, done = expand_functions(model)
    assert (expanded in done) if expanded else not done, done
    want = _reference(model, feeds)
    out = package(model, target="web", out=tmp_path / "b", verify=False)
    got = load_bundle(out, "simd").run(feeds)
    for k, w in want.items():
        assert got[k].shape == w.shape, (k, got[k].shape, w.shape)
        np.testing.assert_allclose(got[k], w, rtol=TOL, atol=TOL, err_msg=k)


def test_rms_normalization(tmp_path):
    n = helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=-1, epsilon=1e-5)
    m = _model([n], [_vi("x", [2, 3, 16])], [_vi("y", [2, 3, 16])], [numpy_helper.from_array(_f(16), "s")])
    check(m, {"x": _f(2, 3, 16)}, tmp_path, "RMSNormalization")


@pytest.mark.parametrize("causal,mask", [(0, False), (1, False), (0, True)])
def test_attention_23(causal, mask, tmp_path):
    """ONNX's own Attention (opset 23), 4-D (B, heads, S, H) inputs, through its context-dependent body."""
    ins = ["q", "k", "v"] + (["m"] if mask else [])
    n = helper.make_node("Attention", ins, ["y"], is_causal=causal)
    feeds = {"q": _f(2, 2, 4, 8), "k": _f(2, 2, 6, 8), "v": _f(2, 2, 6, 8)}
    if mask:
        feeds["m"] = _f(4, 6)
    m = _model([n], [_vi(k, list(v.shape)) for k, v in feeds.items()], [_vi("y", [2, 2, 4, 8])])
    check(m, feeds, tmp_path, "Attention")


def test_rotary_embedding_23(tmp_path):
    b, s, heads, h = 1, 3, 2, 8
    n = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"])
    freqs = np.outer(np.arange(8), 1.0 / 10000 ** (np.arange(0, h, 2) / h)).astype(np.float32)
    m = _model([n], [_vi("x", [b, heads, s, h]), _vi("pos", [b, s], TensorProto.INT64)], [_vi("y", [b, heads, s, h])],
               [numpy_helper.from_array(np.cos(freqs), "cos"), numpy_helper.from_array(np.sin(freqs), "sin")])
    check(m, {"x": _f(b, heads, s, h), "pos": np.array([[0, 2, 5]], np.int64)}, tmp_path, "RotaryEmbedding")


def test_group_normalization_lowering_wins_over_its_body(tmp_path):
    """GroupNormalization has a function body and a lowering of its own (ops/norm_rewrites.py): the lowering is used."""
    n = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-5)
    m = _model([n], [_vi("x", [2, 4, 3, 3])], [_vi("y", [2, 4, 3, 3])],
               [numpy_helper.from_array(_f(4), "s"), numpy_helper.from_array(_f(4), "b")], opset=21)
    check(m, {"x": _f(2, 4, 3, 3)}, tmp_path, None)


def test_mean_variance_normalization(tmp_path):
    n = helper.make_node("MeanVarianceNormalization", ["x"], ["y"])
    m = _model([n], [_vi("x", [2, 3, 4, 4])], [_vi("y", [2, 3, 4, 4])], opset=13)
    check(m, {"x": _f(2, 3, 4, 4)}, tmp_path, "MeanVarianceNormalization")


def test_softmax_cross_entropy_loss(tmp_path):
    n = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["loss"], reduction="mean")
    m = _model([n], [_vi("x", [3, 5]), _vi("t", [3], TensorProto.INT64)], [_vi("loss", [])], opset=13)
    check(m, {"x": _f(3, 5), "t": np.array([0, 4, 2], np.int64)}, tmp_path, "SoftmaxCrossEntropyLoss")


def test_swish(tmp_path):
    n = helper.make_node("Swish", ["x"], ["y"], alpha=0.7)
    m = _model([n], [_vi("x", [2, 8])], [_vi("y", [2, 8])], opset=24)
    check(m, {"x": _f(2, 8)}, tmp_path, "Swish")


def test_window_folds_at_package_time(tmp_path):
    """A window of constant size folds into a constant, multiplied in at run time. HannWindow has a lowering of its
    own (packager/ops/spectral.py: reached only when the size is not a constant, to ask for it), so it is never
    expanded."""
    nodes = [helper.make_node("HannWindow", ["n"], ["w"]), helper.make_node("Mul", ["x", "w"], ["y"])]
    m = _model(nodes, [_vi("x", [10])], [_vi("y", [10])], [numpy_helper.from_array(np.array(10, np.int64), "n")],
               opset=17)
    check(m, {"x": _f(10)}, tmp_path, None)


def test_lowered_ops_stay():
    """Ops with a lowering keep it (LayerNormalization has a function body too)."""
    n = helper.make_node("LayerNormalization", ["x", "s"], ["y"])
    m = _model([n], [_vi("x", [2, 4])], [_vi("y", [2, 4])], [numpy_helper.from_array(_f(4), "s")], opset=17)
    out, done = expand_functions(m)
    assert not done and [x.op_type for x in out.graph.node] == ["LayerNormalization"]


def test_body_refusal_names_the_function(tmp_path):
    """AffineGrid with a run-time size: its body's shapes depend on that value; the refusal names the body node
    under the original node ('grid1/AffineGrid body/...')."""
    n = helper.make_node("AffineGrid", ["t", "s"], ["y"], name="grid1")
    m = _model([n], [_vi("t", [1, 2, 3]), _vi("s", [4], TensorProto.INT64)], [_vi("y", ["n", "h", "w", 2])], opset=20)
    with pytest.raises(PackagerError) as e:
        package(m, target="web", out=tmp_path / "b", verify=False)
    assert "grid1/AffineGrid body/" in str(e.value), str(e.value)


def test_center_crop_pad_constant_shape(tmp_path):
    n = helper.make_node("CenterCropPad", ["x", "s"], ["y"])
    m = _model([n], [_vi("x", [5, 7])], [_vi("y", [7, 4])], [numpy_helper.from_array(np.array([7, 4], np.int64), "s")],
               opset=18)
    check(m, {"x": _f(5, 7)}, tmp_path, None)   # its own lowering (SLICE, PAD): not expanded


def test_nested_bodies_adapted_to_the_opset(tmp_path):
    """SwiGLU (opset 28) calls Swish, whose body onnx writes for opset 24: expanded in a second round, adapted by
    onnx's version converter."""
    n = helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=1.2)
    m = _model([n], [_vi("a", [2, 8]), _vi("b", [2, 8])], [_vi("y", [2, 8])], opset=28)
    _, done = expand_functions(m)
    assert done == {"SwiGLU": 1, "Swish": 1}
    check(m, {"a": _f(2, 8), "b": _f(2, 8)}, tmp_path, "SwiGLU")


def test_shrink(tmp_path):
    n = helper.make_node("Shrink", ["x"], ["y"], lambd=0.5, bias=0.25)
    m = _model([n], [_vi("x", [3, 4])], [_vi("y", [3, 4])], opset=18)
    check(m, {"x": _f(3, 4)}, tmp_path, "Shrink")


def test_body_without_a_version_at_the_opset_refused(tmp_path):
    """Shrink's body (opset 18) uses CastLike, which opset 9 lacks: not expanded, refused by name."""
    n = helper.make_node("Shrink", ["x"], ["y"], name="shrink9")
    m = _model([n], [_vi("x", [3, 4])], [_vi("y", [3, 4])], opset=9)
    assert expand_functions(m)[1] == {}
    with pytest.raises(PackagerError, match=r"Shrink \(node 'shrink9', opset 9\)"):
        package(m, target="web", out=tmp_path / "b", verify=False)


def test_flex_attention_preview_domain(tmp_path):
    """onnx's ai.onnx.preview FlexAttention: accepted without --allow-domain (onnx defines it by a function) and
    expanded like a standard op; checked against onnx's reference (onnxruntime has no preview domain)."""
    n = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview")
    g = helper.make_graph([n], "fn", [_vi("q", [2, 4, 8, 16]), _vi("k", [2, 4, 6, 16]), _vi("v", [2, 4, 6, 16])],
                          [_vi("y", [2, 4, 8, 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 26), helper.make_opsetid("ai.onnx.preview", 1)])
    m.ir_version = 10
    check(m, {"q": _f(2, 4, 8, 16), "k": _f(2, 4, 6, 16), "v": _f(2, 4, 6, 16)}, tmp_path, "FlexAttention")


def test_linear_attention_opset_27(tmp_path):
    """LinearAttention (opset 27, which onnxruntime refuses to load): its body's shapes are probed by onnxruntime on
    the model restamped to opset 26 (every op of the body unchanged since: packager/reference.py ort_model)."""
    n = helper.make_node("LinearAttention", ["q", "k", "v"], ["y", "state"], update_rule="linear", q_num_heads=4,
                         kv_num_heads=4)
    m = _model([n], [_vi("q", [2, 4, 32]), _vi("k", [2, 4, 32]), _vi("v", [2, 4, 32])],
               [_vi("y", [2, 4, 32]), _vi("state", [2, 4, 8, 8])], opset=27)
    check(m, {"q": _f(2, 4, 32), "k": _f(2, 4, 32), "v": _f(2, 4, 32)}, tmp_path, "LinearAttention")
