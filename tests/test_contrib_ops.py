"""onnxruntime's contrib ops (com.microsoft), rewritten into standard ONNX by packager/passes/contrib.py: each small
model is packaged, run by the wasm SIMD build under wasmtime and compared with onnxruntime CPU running the
contrib op itself. Tolerances: 1e-4 for float ops; int8 outputs within one quantization step (onnxruntime's
integer kernels and edgepack's round the float result independently)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.errors import PackagerError
from packager.plan.opcodes import Op

from .conftest import plan_ops

MS = "com.microsoft"
TOL = 1e-4
RNG = np.random.default_rng(0)


def _model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "contrib", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


def _vi(name: str, shape, dt=TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dt, list(shape) if shape is not None else None)


def _init(name: str, arr) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(arr), name)


def _f(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _ort(model: onnx.ModelProto, feeds: dict) -> dict[str, np.ndarray]:
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def check(model: onnx.ModelProto, feeds: dict, tmp_path, atol: float = TOL, steps: int = 0) -> list[str]:
    """Package, run (SIMD build), compare with onnxruntime. steps: integer outputs may differ by this many.
    Returns the plan's kernels."""
    want = _ort(model, feeds)
    out = package(model, target="web", out=tmp_path / "b", verify=False)
    got = load_bundle(out, "simd").run(feeds)
    for k, w in want.items():
        assert got[k].shape == w.shape, (k, got[k].shape, w.shape)
        assert got[k].dtype == w.dtype, (k, got[k].dtype, w.dtype)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(got[k], w, rtol=TOL, atol=atol, err_msg=k)
        else:
            d = np.abs(got[k].astype(np.int64) - w.astype(np.int64))
            assert d.max(initial=0) <= steps, (k, d.max())
    return [Op(o).name for o in plan_ops(out)]


# -- GELU family --------------------------------------------------------------------------------------
@pytest.mark.parametrize("op,bias,opset", [("Gelu", False, 17), ("Gelu", False, 20), ("BiasGelu", True, 17),
                                           ("FastGelu", True, 17), ("FastGelu", False, 20), ("QuickGelu", False, 17)])
def test_gelu_family(op, bias, opset, tmp_path):
    ins = ["x", "b"] if bias else ["x"]
    node = helper.make_node(op, ins, ["y"], domain=MS, **({"alpha": 1.5} if op == "QuickGelu" else {}))
    m = _model([node], [_vi("x", [2, 3, 8])], [_vi("y", [2, 3, 8])], [_init("b", _f(8))] if bias else [], opset)
    check(m, {"x": _f(2, 3, 8) * 2}, tmp_path)


# -- layer norms --------------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [14, 17])
def test_skip_layer_norm(opset, tmp_path):
    node = helper.make_node("SkipLayerNormalization", ["x", "s", "g", "be", "bi"], ["y", "", "", "sum"], domain=MS,
                            epsilon=1e-5)
    m = _model([node], [_vi("x", [2, 4, 16]), _vi("s", [2, 4, 16])], [_vi("y", [2, 4, 16]), _vi("sum", [2, 4, 16])],
               [_init("g", _f(16)), _init("be", _f(16)), _init("bi", _f(16))], opset)
    check(m, {"x": _f(2, 4, 16), "s": _f(2, 4, 16)}, tmp_path)


def test_simplified_layer_norms(tmp_path):
    """Also package-time verification: onnxruntime runs its default-domain SimplifiedLayerNormalization."""
    # onnxruntime registers SimplifiedLayerNormalization in the default domain
    nodes = [helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], epsilon=1e-6, axis=-1),
             helper.make_node("SkipSimplifiedLayerNormalization", ["x", "s", "g", "bi"], ["z", "", "", "sum"],
                              domain=MS, epsilon=1e-6)]
    m = _model(nodes, [_vi("x", [2, 5, 16]), _vi("s", [2, 5, 16])],
               [_vi("y", [2, 5, 16]), _vi("z", [2, 5, 16]), _vi("sum", [2, 5, 16])],
               [_init("g", _f(16)), _init("bi", _f(16))])
    check(m, {"x": _f(2, 5, 16), "s": _f(2, 5, 16)}, tmp_path)
    import json
    out = package(m, target="web", out=tmp_path / "v")
    v = json.loads((out / "manifest.json").read_text())["verification"]
    assert v["reference"] == "onnxruntime CPU" and v["max_abs_diff"] < TOL, v


# -- quantized ops ---------------------------------------------------------------------------------
def _q(name, scale, zp, dt):
    return [_init(f"{name}_s", np.float32(scale)), _init(f"{name}_z", np.array(zp, dt))]


def _qdata(shape, dt) -> np.ndarray:
    info = np.iinfo(dt)
    return RNG.integers(info.min, info.max + 1, shape).astype(dt)


def _weights7(shape) -> np.ndarray:
    """int8 weights for a uint8 x int8 product checked against onnxruntime: 7 bits. onnxruntime's u8s8 kernels on
    x86 without VNNI (AVX2 vpmaddubsw) saturate 16-bit pair sums with 8-bit weights, a wrong reference on such CPUs
    (its quantization tools pass reduce_range there for this reason)."""
    return RNG.integers(-64, 64, shape).astype(np.int8)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_qlinear_binary(op, dt, tmp_path):
    tp = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    zp = 128 if dt == np.uint8 else 0
    node = helper.make_node(op, ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"], ["c"], domain=MS)
    inits = _q("a", 0.02, zp + 3, dt) + _q("b", 0.03, zp - 5, dt) + _q("c", 0.05 if op == "QLinearAdd" else 0.4, zp, dt)
    m = _model([node], [_vi("a", [2, 3, 8], tp), _vi("b", [2, 3, 8], tp)], [_vi("c", [2, 3, 8], tp)], inits)
    kernels = check(m, {"a": _qdata((2, 3, 8), dt), "b": _qdata((2, 3, 8), dt)}, tmp_path, steps=1)
    if op == "QLinearAdd":   # DQ -> Add -> Q fuses back into the int8 kernel
        assert kernels == ["QADD"], kernels


@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu"])
def test_qlinear_unary(op, tmp_path):
    node = helper.make_node(op, ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain=MS,
                            **({"alpha": 0.1} if op == "QLinearLeakyRelu" else {}))
    inits = _q("x", 0.05, 120, np.uint8) + _q("y", 1 / 256 if op == "QLinearSigmoid" else 0.04, 0 if op ==
                                                 "QLinearSigmoid" else 100, np.uint8)
    m = _model([node], [_vi("x", [2, 16], TensorProto.UINT8)], [_vi("y", [2, 16], TensorProto.UINT8)], inits)
    check(m, {"x": _qdata((2, 16), np.uint8)}, tmp_path, steps=1)


def test_contrib_qdq(tmp_path):
    """com.microsoft QuantizeLinear / DequantizeLinear (the quantizer's UseQDQContribOps) around a Conv: the int8
    path fuses them into QCONV."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_s", "x_z"], ["xq"], domain=MS),
             helper.make_node("DequantizeLinear", ["xq", "x_s", "x_z"], ["xd"], domain=MS),
             helper.make_node("DequantizeLinear", ["w", "w_s", "w_z"], ["wd"], domain=MS),
             helper.make_node("Conv", ["xd", "wd"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    inits = _q("x", 0.03, 128, np.uint8) + [_init("w", _qdata((4, 3, 3, 3), np.int8)), _init("w_s", np.float32(0.01)),
                                            _init("w_z", np.int8(0))]
    m = _model(nodes, [_vi("x", [1, 3, 6, 6])], [_vi("y", [1, 4, 6, 6])], inits)
    kernels = check(m, {"x": _f(1, 3, 6, 6)}, tmp_path, atol=1e-3)
    assert "QCONV" in kernels, kernels


@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_pools(channels_last, tmp_path):
    shape = [1, 5, 6, 4] if channels_last else [1, 4, 5, 6]
    out_g = [1, 1, 1, 4] if channels_last else [1, 4, 1, 1]
    out_a = [1, 2, 3, 4] if channels_last else [1, 4, 2, 3]
    nodes = [helper.make_node("QLinearGlobalAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["g"], domain=MS,
                              channels_last=channels_last),
             helper.make_node("QLinearAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["a"], domain=MS,
                              kernel_shape=[2, 2], strides=[2, 2], channels_last=channels_last)]
    inits = _q("x", 0.05, 120, np.uint8) + _q("y", 0.04, 110, np.uint8)
    m = _model(nodes, [_vi("x", shape, TensorProto.UINT8)],
               [_vi("g", out_g, TensorProto.UINT8), _vi("a", out_a, TensorProto.UINT8)], inits)
    check(m, {"x": _qdata(shape, np.uint8)}, tmp_path, steps=1)


def test_qlinear_concat(tmp_path):
    node = helper.make_node("QLinearConcat", ["y_s", "y_z", "a", "a_s", "a_z", "b", "b_s", "b_z"], ["y"], domain=MS,
                            axis=1)
    inits = _q("y", 0.05, 128, np.uint8) + _q("a", 0.03, 120, np.uint8) + _q("b", 0.07, 130, np.uint8)
    m = _model([node], [_vi("a", [2, 3, 4], TensorProto.UINT8), _vi("b", [2, 5, 4], TensorProto.UINT8)],
               [_vi("y", [2, 8, 4], TensorProto.UINT8)], inits)
    check(m, {"a": _qdata((2, 3, 4), np.uint8), "b": _qdata((2, 5, 4), np.uint8)}, tmp_path, steps=1)


@pytest.mark.parametrize("quantized_out", [False, True])
def test_qgemm(quantized_out, tmp_path):
    ins = ["a", "a_s", "a_z", "w", "w_s", "w_z", "c"] + (["y_s", "y_z"] if quantized_out else [])
    node = helper.make_node("QGemm", ins, ["y"], domain=MS, transB=1, alpha=1.0)
    inits = _q("a", 0.02, 128, np.uint8) + [_init("w", _weights7((6, 8))), _init("w_s", np.float32(0.01)),
                                            _init("w_z", np.int8(0)), _init("c", RNG.integers(-500, 500, 6).astype(np.int32))]
    if quantized_out:
        inits += _q("y", 0.05, 128, np.uint8)
    out_t = TensorProto.UINT8 if quantized_out else TensorProto.FLOAT
    m = _model([node], [_vi("a", [3, 8], TensorProto.UINT8)], [_vi("y", [3, 6], out_t)], inits)
    kernels = check(m, {"a": _qdata((3, 8), np.uint8)}, tmp_path, atol=1e-4, steps=1)
    assert kernels == ["QMATMUL"], kernels


@pytest.mark.parametrize("per_column", [False, True])
def test_dynamic_quantize_matmul(per_column, tmp_path):
    w = _weights7((8, 6))
    scale = (RNG.random(6) * 0.02 + 0.005).astype(np.float32) if per_column else np.float32(0.01)
    node = helper.make_node("DynamicQuantizeMatMul", ["a", "w", "w_s", "", "bias"], ["y"], domain=MS)
    m = _model([node], [_vi("a", [2, 3, 8])], [_vi("y", [2, 3, 6])],
               [_init("w", w), _init("w_s", scale), _init("bias", _f(6))])
    check(m, {"a": _f(2, 3, 8)}, tmp_path, atol=1e-3)


def test_matmul_integer_to_float(tmp_path):
    node = helper.make_node("MatMulIntegerToFloat", ["a", "w", "a_s", "w_s", "a_z", "w_z", "bias"], ["y"], domain=MS)
    m = _model([node], [_vi("a", [4, 8], TensorProto.UINT8)], [_vi("y", [4, 6])],
               [_init("w", _qdata((8, 6), np.uint8)), _init("a_s", np.float32(0.02)), _init("w_s", np.float32(0.01)),
                _init("a_z", np.uint8(128)), _init("w_z", np.uint8(120)), _init("bias", _f(6))])
    check(m, {"a": _qdata((4, 8), np.uint8)}, tmp_path, atol=1e-3)


# -- fused float ops -------------------------------------------------------------------------------
@pytest.mark.parametrize("act,params,z", [("Relu", [], False), ("LeakyRelu", [0.1], True), ("Clip", [-0.5, 0.5], False),
                                          ("HardSigmoid", [0.3, 0.4], False)])
def test_fused_conv(act, params, z, tmp_path):
    ins = ["x", "w", "b"] + (["z"] if z else [])
    node = helper.make_node("FusedConv", ins, ["y"], domain=MS, activation=act, kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                            **({"activation_params": params} if params else {}))
    inputs = [_vi("x", [1, 3, 6, 6])] + ([_vi("z", [1, 4, 6, 6])] if z else [])
    m = _model([node], inputs, [_vi("y", [1, 4, 6, 6])], [_init("w", _f(4, 3, 3, 3)), _init("b", _f(4))])
    feeds = {"x": _f(1, 3, 6, 6), **({"z": _f(1, 4, 6, 6)} if z else {})}
    check(m, feeds, tmp_path)


@pytest.mark.parametrize("act", ["Relu", "LeakyRelu", "Sigmoid", "Tanh"])
def test_fused_gemm(act, tmp_path):
    node = helper.make_node("FusedGemm", ["a", "w", "c"], ["y"], domain=MS, activation=act, activation_alpha=0.2,
                            transB=1, alpha=0.5, beta=1.0)
    m = _model([node], [_vi("a", [3, 8])], [_vi("y", [3, 5])], [_init("w", _f(5, 8)), _init("c", _f(5))])
    check(m, {"a": _f(3, 8)}, tmp_path)


# -- transformer ops -------------------------------------------------------------------------------
def _attention_model(mask: str | None, unidirectional: int = 0, past: bool = False, const_w: bool = True,
                     b=2, s=4, hidden=16, heads=2, p=3):
    ins = ["x", "w", "bias", "mask" if mask else "", "past" if past else ""]
    outs = ["y", "present"] if past else ["y"]
    node = helper.make_node("Attention", ins, outs, domain=MS, num_heads=heads, unidirectional=unidirectional)
    inputs = [_vi("x", [b, s, hidden])]
    inits = [_init("bias", _f(3 * hidden))]
    w = _f(hidden, 3 * hidden) * 0.3
    if const_w:
        inits.append(_init("w", w))
    else:
        inputs.append(_vi("w", [hidden, 3 * hidden]))
    feeds = {"x": _f(b, s, hidden)}
    if not const_w:
        feeds["w"] = w
    t = s + (p if past else 0)
    if mask == "1d":
        inputs.append(_vi("mask", [b], TensorProto.INT32))
        feeds["mask"] = np.array([t, t - 2][:b], np.int32)
    elif mask == "1d2":   # end positions, then start positions (left padding)
        inputs.append(_vi("mask", [2 * b], TensorProto.INT32))
        feeds["mask"] = np.array([t, t - 1, 0, 2], np.int32)
    elif mask == "2d":
        inputs.append(_vi("mask", [b, t], TensorProto.INT32))
        m = np.ones((b, t), np.int32)
        m[1, -2:] = 0
        m[1, 0] = 0   # under a causal mask, query 0 of row 1 then sees padding only
        feeds["mask"] = m
    elif mask == "3d":
        inputs.append(_vi("mask", [b, s, t], TensorProto.INT32))
        feeds["mask"] = (RNG.random((b, s, t)) > 0.3).astype(np.int32)
        feeds["mask"][:, :, 0] = 1
    out_vi = [_vi("y", [b, s, hidden])]
    if past:
        inputs.append(_vi("past", [2, b, heads, p, hidden // heads]))
        feeds["past"] = _f(2, b, heads, p, hidden // heads)
        out_vi.append(_vi("present", [2, b, heads, t, hidden // heads]))
    return _model([node], inputs, out_vi, inits), feeds


@pytest.mark.parametrize("mask,uni,past,const_w", [(None, 0, False, True), ("1d", 0, False, True), ("1d2", 0, False, True),
                                                   ("2d", 0, False, True),
                                                   ("3d", 0, False, False), (None, 1, False, True), ("2d", 1, True, True)])
def test_attention(mask, uni, past, const_w, tmp_path):
    m, feeds = _attention_model(mask, uni, past, const_w)
    check(m, feeds, tmp_path)


@pytest.mark.parametrize("opset", [11, 13])
def test_attention_older_opsets(opset, tmp_path):
    """The rewrite's opset-dependent forms (Unsqueeze/ReduceSum/Split axes as attributes before 13)."""
    m, feeds = _attention_model("1d", 1, True)
    m.opset_import[0].version = opset
    check(m, feeds, tmp_path)


def _mha_model(cross: bool, mask: str | None, bias: bool, attn_bias: bool, past: bool, uni: int = 0,
               b=2, s=3, l=5, d=16, heads=4, p=2):
    kv_len = l if cross else s
    ins = ["q", "k", "v", "bias" if bias else "", "mask" if mask else "", "ab" if attn_bias else "",
           "pk" if past else "", "pv" if past else ""]
    outs = ["y", "present_k", "present_v"] if past else ["y"]
    node = helper.make_node("MultiHeadAttention", ins, outs, domain=MS, num_heads=heads, unidirectional=uni)
    feeds = {"q": _f(b, s, d), "k": _f(b, kv_len, d), "v": _f(b, kv_len, d)}
    inputs = [_vi(k, v.shape) for k, v in feeds.items()]
    inits = [_init("bias", _f(3 * d))] if bias else []
    t = kv_len + (p if past else 0)
    if mask in ("2d", "2d0"):
        mk = np.ones((b, t), np.int32)
        mk[0, -1] = 0
        if mask == "2d0":   # the first key padded: under a causal mask, query 0 sees padding only
            mk[1, 0] = 0
        feeds["mask"] = mk
        inputs.append(_vi("mask", [b, t], TensorProto.INT32))
    if mask == "1d":   # valid key lengths
        feeds["mask"] = np.array([t, t - 2][:b], np.int32)
        inputs.append(_vi("mask", [b], TensorProto.INT32))
    if attn_bias:
        feeds["ab"] = _f(1, heads, s, t)
        inputs.append(_vi("ab", [1, heads, s, t]))
    outputs = [_vi("y", [b, s, d])]
    if past:
        for n in ("pk", "pv"):
            feeds[n] = _f(b, heads, p, d // heads)
            inputs.append(_vi(n, [b, heads, p, d // heads]))
        outputs += [_vi("present_k", [b, heads, t, d // heads]), _vi("present_v", [b, heads, t, d // heads])]
    return _model([node], inputs, outputs, inits), feeds


@pytest.mark.parametrize("cross,mask,bias,attn_bias,past,uni", [
    (False, None, False, False, False, 0), (True, "2d", True, False, False, 0), (False, None, True, True, False, 0),
    (False, "2d", False, False, True, 1), (False, "2d0", False, False, False, 1), (True, "1d", False, False, False, 0)])
def test_multi_head_attention(cross, mask, bias, attn_bias, past, uni, tmp_path):
    m, feeds = _mha_model(cross, mask, bias, attn_bias, past, uni)
    check(m, feeds, tmp_path)


@pytest.mark.parametrize("interleaved,rank,offset,partial", [(0, 3, False, False), (1, 3, False, False),
                                                             (0, 4, True, False), (1, 3, True, True)])
def test_rotary_embedding(interleaved, rank, offset, partial, tmp_path):
    b, s, n, h, max_pos = 2, 5, 2, 8, 16
    rd = 4 if partial else h
    shape = [b, s, n * h] if rank == 3 else [b, n, s, h]
    attrs = {"interleaved": interleaved, "num_heads": n if rank == 3 else 0}
    if partial:
        attrs["rotary_embedding_dim"] = rd
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS, **attrs)
    freqs = np.outer(np.arange(max_pos), 1.0 / 10000 ** (np.arange(0, rd, 2) / rd)).astype(np.float32)
    pos = np.array([3], np.int64) if offset else RNG.integers(0, max_pos, (b, s)).astype(np.int64)
    m = _model([node], [_vi("x", shape), _vi("pos", pos.shape, TensorProto.INT64)], [_vi("y", shape)],
               [_init("cos", np.cos(freqs)), _init("sin", np.sin(freqs))])
    check(m, {"x": _f(*shape), "pos": pos}, tmp_path)


def test_embed_layer_norm(tmp_path):
    b, s, h, vocab = 2, 6, 16, 30
    node = helper.make_node("EmbedLayerNormalization", ["ids", "seg", "we", "pe", "se", "g", "be", "mask"],
                            ["y", "mask_index", "sum"], domain=MS, epsilon=1e-5)
    inits = [_init("we", _f(vocab, h)), _init("pe", _f(16, h)), _init("se", _f(2, h)), _init("g", _f(h)),
             _init("be", _f(h))]
    m = _model([node], [_vi("ids", [b, s], TensorProto.INT32), _vi("seg", [b, s], TensorProto.INT32),
                        _vi("mask", [b, s], TensorProto.INT32)],
               [_vi("y", [b, s, h]), _vi("mask_index", [b], TensorProto.INT32), _vi("sum", [b, s, h])], inits)
    mask = np.ones((b, s), np.int32)
    mask[1, 4:] = 0
    check(m, {"ids": RNG.integers(0, vocab, (b, s)).astype(np.int32),
              "seg": RNG.integers(0, 2, (b, s)).astype(np.int32), "mask": mask}, tmp_path)


# -- refusals --------------------------------------------------------------------------------------
def test_unknown_contrib_op_named(tmp_path):
    node = helper.make_node("NhwcMaxPool", ["x"], ["y"], domain=MS, name="pool7", kernel_shape=[2, 2])
    m = _model([node], [_vi("x", [1, 4, 4, 3], TensorProto.UINT8)], [_vi("y", None, TensorProto.UINT8)])
    with pytest.raises(PackagerError) as e:
        package(m, target="web", out=tmp_path / "b", verify=False)
    msg = str(e.value)
    assert "com.microsoft.NhwcMaxPool" in msg and "pool7" in msg and "no rewrite" in msg


def test_unimplemented_attribute_named(tmp_path):
    m, _ = _attention_model(None)
    m.graph.node[0].name = "attn3"
    m.graph.node[0].attribute.append(helper.make_attribute("do_rotary", 1))
    with pytest.raises(PackagerError) as e:
        package(m, target="web", out=tmp_path / "b", verify=False)
    msg = str(e.value)
    assert msg.startswith("unsupported: com.microsoft.Attention (node 'attn3', opset 17)") and "do_rotary" in msg


def test_malformed_contrib_node_named(tmp_path):
    m, _ = _attention_model(None)
    del m.graph.node[0].attribute[:]   # num_heads missing
    with pytest.raises(PackagerError, match=r"com.microsoft.Attention \(node 'Attention_0', opset 17\): attribute "
                                            r"num_heads must be a positive integer"):
        package(m, target="web", out=tmp_path / "b", verify=False)


@pytest.mark.parametrize("domain", [MS, "com.example"])
def test_allowed_unused_custom_node_dropped(domain, tmp_path):
    """The loader's --allow-domain advice leads somewhere: unused nodes of the allowed domain are dropped."""
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("NhwcMaxPool", ["x"], ["t"], domain=domain),
             helper.make_node("Thing", ["t"], ["unused"], domain=domain)]
    m = _model(nodes, [_vi("x", [1, 4])], [_vi("y", [1, 4])])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(PackagerError, match=f"--allow-domain {domain} accepts the model only where"):
        package(m, target="web", out=tmp_path / "b", verify=False)
    out = package(m, target="web", out=tmp_path / "b", verify=False, allow_domains=(domain,))
    x = _f(1, 4)
    np.testing.assert_allclose(load_bundle(out, "simd").run({"x": x})["y"], np.maximum(x, 0))


# -- end to end: what onnxruntime's own tools write --------------------------------------------------
def test_quantize_dynamic_end_to_end(tmp_path):
    """onnxruntime.quantization.quantize_dynamic, then onnxruntime's saved optimized graph (the form such models
    are shipped in: DynamicQuantizeMatMul with bias), packaged and matched against onnxruntime."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])]
    m = _model(nodes, [_vi("x", [2, 4, 16])], [_vi("y", [2, 4, 8])],
               [_init("w1", _f(16, 32)), _init("b1", _f(32)), _init("w2", _f(32, 8))])
    m.opset_import.pop()   # a plain float model
    onnx.save(m, tmp_path / "mlp.onnx")
    quantize_dynamic(tmp_path / "mlp.onnx", tmp_path / "mlp_q.onnx", weight_type=QuantType.QInt8, per_channel=True,
                     reduce_range=True)   # 7-bit weights: see _weights7
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp_path / "mlp_opt.onnx")
    ort.InferenceSession(str(tmp_path / "mlp_q.onnx"), so, providers=["CPUExecutionProvider"])
    opt = onnx.load(tmp_path / "mlp_opt.onnx")
    assert [n.op_type for n in opt.graph.node if n.domain == MS] == ["DynamicQuantizeMatMul"] * 2
    check(opt, {"x": _f(2, 4, 16)}, tmp_path, atol=2e-3)


BERT_EXPORT = r'''
import math, sys, torch, torch.nn as nn
class Layer(nn.Module):
    def __init__(s, h, n, inter, gelu):
        super().__init__(); s.n, s.hd, s.gelu = n, h // n, gelu
        s.q, s.k, s.v, s.o = (nn.Linear(h, h) for _ in range(4)); s.ln1 = nn.LayerNorm(h, eps=1e-12)
        s.i, s.out, s.ln2 = nn.Linear(h, inter), nn.Linear(inter, h), nn.LayerNorm(h, eps=1e-12)
    def heads(s, x):
        b, l, _ = x.size(); return x.view(b, l, s.n, s.hd).permute(0, 2, 1, 3)
    def forward(s, x, mask):
        q, k, v = s.heads(s.q(x)), s.heads(s.k(x)), s.heads(s.v(x))
        p = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(s.hd) + mask, dim=-1)
        c = torch.matmul(p, v).permute(0, 2, 1, 3).contiguous()
        a = s.ln1(s.o(c.view(c.size()[:-2] + (s.n * s.hd,))) + x)
        return s.ln2(s.out(torch.nn.functional.gelu(s.i(a), approximate=s.gelu)) + a)
class Bert(nn.Module):   # the structure of transformers' BertModel, tiny
    def __init__(s, vocab=50, h=32, n=4, inter=64, layers=2, maxpos=16):
        super().__init__()
        s.we, s.pe, s.te = nn.Embedding(vocab, h), nn.Embedding(maxpos, h), nn.Embedding(2, h)
        s.ln = nn.LayerNorm(h, eps=1e-12)
        s.register_buffer("pos", torch.arange(maxpos).expand((1, -1)))
        s.layers = nn.ModuleList([Layer(h, n, inter, ("none", "tanh")[i % 2]) for i in range(layers)])
    def forward(s, ids, mask, tt):
        x = s.ln(s.we(ids) + s.pe(s.pos[:, :ids.size(1)]) + s.te(tt))
        m = (1.0 - mask[:, None, None, :].to(torch.float32)) * -10000.0
        for layer in s.layers:
            x = layer(x, m)
        return x
torch.manual_seed(0)
ids = torch.randint(0, 50, (2, 8)); mask = torch.ones(2, 8, dtype=torch.int64); tt = torch.zeros(2, 8, dtype=torch.int64)
axes = {0: "batch", 1: "seq"}
torch.onnx.export(Bert().eval(), (ids, mask, tt), sys.argv[1], input_names=["input_ids", "attention_mask",
                  "token_type_ids"], output_names=["last_hidden_state"], opset_version=14, dynamo=False,
                  dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                                "last_hidden_state": axes})
'''


def test_bert_transformer_optimizer_end_to_end(tmp_path, monkeypatch):
    """A tiny BERT (torch export, in a child process) through onnxruntime.transformers.optimizer.optimize_model
    (model_type='bert'): EmbedLayerNormalization, Attention with its mask, SkipLayerNormalization, BiasGelu,
    FastGelu (the second layer's tanh GELU); then quantize_dynamic of that (QAttention, QEmbedLayerNormalization);
    each packaged and matched against onnxruntime on padded inputs."""
    import subprocess
    import sys
    pytest.importorskip("torch")
    from onnxruntime.transformers.optimizer import optimize_model
    src = tmp_path / "bert.onnx"
    subprocess.run([sys.executable, "-c", BERT_EXPORT, str(src)], check=True, capture_output=True)
    optimize_model(str(src), model_type="bert", num_heads=4, hidden_size=32, opt_level=0).save_model_to_file(
        str(tmp_path / "bert_opt.onnx"))   # saving adds the com.microsoft opset import
    opt = onnx.load(tmp_path / "bert_opt.onnx")
    ms = {n.op_type for n in opt.graph.node if n.domain == MS}
    assert {"Attention", "SkipLayerNormalization", "BiasGelu", "FastGelu", "EmbedLayerNormalization"} <= ms, ms
    ids = RNG.integers(0, 50, (2, 8)).astype(np.int64)
    mask = np.ones((2, 8), np.int64)
    mask[1, 5:] = 0
    tt = np.zeros((2, 8), np.int64)
    tt[:, 4:] = 1
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": tt}
    want = _ort(opt, feeds)["last_hidden_state"]
    out = package(tmp_path / "bert_opt.onnx", target="web", out=tmp_path / "b", verify=False,
                  input_shapes={k: v.shape for k, v in feeds.items()})
    got = load_bundle(out, "simd").run(feeds)["last_hidden_state"]
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)

    # then onnxruntime's quantize_dynamic on it: QEmbedLayerNormalization, QAttention (its input quantized at run
    # time by DynamicQuantizeLinear), MatMulInteger
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(tmp_path / "bert_opt.onnx", tmp_path / "bert_q.onnx", weight_type=QuantType.QInt8,
                     reduce_range=True, extra_options={"DefaultTensorType": TensorProto.FLOAT})   # see _weights7
    q = onnx.load(tmp_path / "bert_q.onnx")
    assert {"QAttention", "QEmbedLayerNormalization"} <= {n.op_type for n in q.graph.node if n.domain == MS}
    want = _ort(q, feeds)["last_hidden_state"]
    cwd = tmp_path / "cwd"   # onnxruntime's shape inference must not leave files in the working directory
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    out = package(tmp_path / "bert_q.onnx", target="web", out=tmp_path / "bq2", verify=False,
                  input_shapes={k: v.shape for k, v in feeds.items()})
    assert not list(cwd.iterdir())
    got = load_bundle(out, "simd").run(feeds)["last_hidden_state"]
    np.testing.assert_allclose(got, want, rtol=TOL, atol=1e-3)


def test_package_time_verification_runs_the_contrib_ops(tmp_path):
    """package(verify=True) compares the bundle with onnxruntime running the contrib model itself (not the
    rewritten graph), so a rewrite that changed the math would show in the manifest."""
    import json
    m, _ = _attention_model("2d", unidirectional=1)
    out = package(m, target="web", out=tmp_path / "b")
    v = json.loads((out / "manifest.json").read_text())["verification"]
    assert v["reference"] == "onnxruntime CPU" and v["max_abs_diff"] < TOL, v
    notices = json.loads((out / "manifest.json").read_text())["notices"]
    assert "1 com.microsoft.Attention node(s) rewritten into standard ONNX ops" in notices, notices
