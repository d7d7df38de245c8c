"""DEPTHWISE_CONV's channels-as-lanes path (conv.c dw_lanes_*: windows up to 7x7 taps, any stride and dilation, 4
channels per vector) gives the same bits as the phased path it replaces. A plan packaged with THREAD_SLOTS = 1 has one plane
of scratch, too little for the interleaved plane of 4 channels, so the kernel takes the phased path; the default
plan (4 slots, run on one thread) takes the lanes path. Both are run on every wasm build and compared bit for bit,
and against onnxruntime (the scalar wasm build has no lanes path: it runs the phased one both times)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from packager import load_bundle, package
from packager.reference import reference_run
from packager.plan.opcodes import Op

from .conftest import VARIANTS, plan_ops

TOL = 1e-4

# x shape, strides, pads (t, l, b, r)
CASES = [
    ((1, 8, 7, 7), 1, (1, 1, 1, 1)),      # 7x7
    ((1, 12, 14, 14), 1, (1, 1, 1, 1)),   # 14x14
    ((1, 6, 9, 5), 1, (1, 1, 1, 1)),      # odd sizes; C % 4 = 2 channels take the phased path
    ((2, 7, 14, 14), 2, (1, 1, 1, 1)),    # 14 -> 7, batch 2: groups of 4 never cross an image
    ((1, 9, 28, 28), 2, (0, 0, 1, 1)),    # 28 -> 14, asymmetric pads
    ((1, 5, 13, 11), 2, (1, 0, 2, 1)),    # stride 2, odd sizes
    ((1, 4, 6, 4), 1, (0, 0, 0, 2)),      # W = 4, OW = 4: one step per row
    ((1, 4, 5, 9), 2, (2, 2, 2, 2)),      # stride 2, wide pads
    ((1, 4, 3, 3), 1, (1, 1, 1, 1)),      # W < 4: phased path
    # other windows (dw_lanes_any): kernel, dilation
    ((1, 8, 14, 14), 1, (2, 2, 2, 2), 5),       # 5x5 (mobilenet_v3, efficientnet)
    ((1, 6, 13, 11), 2, (2, 2, 2, 2), 5),       # 5x5 stride 2, odd sizes, C % 4 = 2
    ((1, 8, 7, 7), 1, (3, 3, 3, 3), 7),         # 7x7 on a 7x7 plane (convnext)
    ((1, 4, 12, 9), 1, (2, 2, 2, 2), 3, 2),     # 3x3 dilation 2
    ((1, 8, 17, 15), 2, (2, 2, 2, 2), 3, 2),    # 3x3 stride 2 dilation 2: column stride = dilation, as 5x5 stride 1
    ((1, 5, 10, 10), (2, 1), (1, 2, 1, 2), (3, 5)),   # 3x5, strides 2x1
    ((1, 4, 9, 9), 1, (0, 0, 0, 0), 9),         # 9x9: more taps than the lanes path holds: phased path
]

ACTS = [None, ("Relu", {}), ("Clip", {}), ("LeakyRelu", {"alpha": 0.1}), ("Sigmoid", {}), ("HardSwish", {}),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("Tanh", {})]


def _pair(v) -> tuple[int, int]:
    return tuple(v) if isinstance(v, tuple) else (v, v)


def _model(x_shape, stride, pads, kernel=3, dilation=1, act=None, residual=False, seed=0):
    rng = np.random.default_rng(seed)
    c = x_shape[1]
    (sh, sw), (kh, kw), (dh, dw) = _pair(stride), _pair(kernel), _pair(dilation)
    inits = [onnx.numpy_helper.from_array(rng.standard_normal((c, 1, kh, kw)).astype(np.float32), "w"),
             onnx.numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "b")]
    t, l, b, r = pads
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=c, strides=[sh, sw], pads=[t, l, b, r],
                              dilations=[dh, dw])]
    oh = (x_shape[2] + t + b - dh * (kh - 1) - 1) // sh + 1
    ow = (x_shape[3] + l + r - dw * (kw - 1) - 1) // sw + 1
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    last = "c"
    if residual:
        rs = (x_shape[0], c, oh, ow)
        ins.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, list(rs)))
        feeds["r"] = rng.standard_normal(rs).astype(np.float32)
        nodes.append(helper.make_node("Add", [last, "r"], ["s"]))
        last = "s"
    if act is not None:
        name, attrs = act
        if name == "Clip":
            inits += [onnx.numpy_helper.from_array(np.float32(0.0), "lo"), onnx.numpy_helper.from_array(np.float32(1.5), "hi")]
            nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["y"]))
        else:
            nodes.append(helper.make_node(name, [last], ["y"], **attrs))
        last = "y"
    g = helper.make_graph(nodes, "t", ins, [helper.make_tensor_value_info(last, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return onnx.shape_inference.infer_shapes(m), feeds


def _one_dw_node(bundle) -> None:
    ops = [Op(o).name for o in plan_ops(bundle)]
    assert ops.count("DEPTHWISE_CONV") == 1 and len(ops) == 1, ops   # residual and activation fused


def _run(model, feeds, tmp_path, name, monkeypatch, slots):
    import packager.ops.conv as conv
    monkeypatch.setattr(conv, "THREAD_SLOTS", slots)
    out = package(model, target="web", out=tmp_path / name, verify=False)
    return out, {v: load_bundle(out, v).run(feeds) for v in VARIANTS}


def _lanes_vs_phased(model, feeds, tmp_path, monkeypatch):
    """Runs both packagings on every build; asserts the same bits, and onnxruntime's result within TOL. Returns
    the lanes bundle."""
    lanes_b, lanes = _run(model, feeds, tmp_path, "lanes", monkeypatch, 4)
    _, phased = _run(model, feeds, tmp_path, "phased", monkeypatch, 1)
    want = reference_run(model, feeds)
    for v in VARIANTS:
        for k, w in want.items():
            np.testing.assert_array_equal(lanes[v][k], phased[v][k], err_msg=f"{v}: lanes vs phased")
            np.testing.assert_allclose(lanes[v][k], w, rtol=TOL, atol=TOL, err_msg=f"{v}: vs onnxruntime")
    return lanes_b


def _case_id(c) -> str:
    return f"{c[0]}s{c[1]}p{''.join(map(str, c[2]))}" + "".join(f"{k}{v}" for k, v in zip("kd", c[3:]))


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
@pytest.mark.parametrize("act,residual", [(None, False), (("Relu", {}), True), (("Clip", {}), False)])
def test_lanes_same_bits(case, act, residual, tmp_path, monkeypatch) -> None:
    model, feeds = _model(*case, act=act, residual=residual)
    _one_dw_node(_lanes_vs_phased(model, feeds, tmp_path, monkeypatch))


@pytest.mark.parametrize("act", ACTS, ids=[a[0] if a else "none" for a in ACTS])
@pytest.mark.parametrize("residual", [False, True])
def test_lanes_epilogues(act, residual, tmp_path, monkeypatch) -> None:
    model, feeds = _model((2, 10, 9, 7), 1, (1, 1, 1, 1), act=act, residual=residual, seed=1)
    _lanes_vs_phased(model, feeds, tmp_path, monkeypatch)


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_lanes_under_asan(case, tmp_path, monkeypatch) -> None:
    """The ASan + UBSan edgepack-run (edge/build/asan) on the lanes path, with a residual and an activation."""
    from packager.bundle import Bundle

    from .conformance import runner_asan
    model, feeds = _model(*case, act=("HardSwish", {}), residual=True, seed=2)
    out, _ = _run(model, feeds, tmp_path, "lanes", monkeypatch, 4)
    status, why, got = runner_asan.run_asan_cli(runner_asan.build_cli(), out, feeds, Bundle(out).outputs, timeout=600)
    assert status == "ok", why
    for k, w in reference_run(model, feeds).items():
        np.testing.assert_allclose(got[k], w, rtol=TOL, atol=TOL, err_msg="ASan edgepack-run")
