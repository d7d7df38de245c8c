"""QWINOGRAD_CONV (wasm_kernels/src/kernels/qwinograd.c): QCONV's 3x3 stride-1 convs as exact integer Winograd
F(2x2, 3x3). Its outputs are bit-identical to QCONV's (the same model packaged with packager.ops.quant.QWINOGRAD
off) on every build, and its check() refuses hostile parameters."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import packager.ops.quant as quant
from packager import load_bundle, package
from packager.plan.opcodes import Op

from .conftest import make_model, plan_ops
from .param_mutants import check_hostile_params
from .test_int8 import VARIANTS, _ort, _qdq


def _model(cin: int, cout: int, h: int, w: int, pads: tuple[int, int, int, int], act: str, x_u8: bool, x_zp: int,
           w_u8: bool = False, per_tensor: bool = False, batch: int = 1, out: str = "q", residual: bool = False,
           seed: int = 0) -> onnx.ModelProto:
    """x -> Q -> DQ, DQ(w) [per channel or tensor, zero point for uint8 weights], DQ(b int32) -> Conv 3x3 s1
    -> act -> [+ residual] -> Q -> DQ -> y (out "q"); out "f32": no output Q (QCONV writes float32)."""
    rng = np.random.default_rng(seed)
    nw = 1 if per_tensor else cout
    if w_u8:
        wq = rng.integers(0, 256, (cout, cin, 3, 3)).astype(np.uint8)
        wz = rng.integers(100, 156, nw).astype(np.uint8)
    else:
        wq = rng.integers(-127, 128, (cout, cin, 3, 3)).astype(np.int8)
        wz = np.zeros(nw, np.int8)
    ws = ((rng.random(nw) + 0.5) * 0.01).astype(np.float32)
    xs, ys = np.float32(0.02), np.float32(0.05)
    np_x = np.uint8 if x_u8 else np.int8
    b = rng.integers(-2000, 2000, cout).astype(np.int32)
    scalar = (lambda a: a.reshape(())) if per_tensor else (lambda a: a)
    inits = [numpy_helper.from_array(np.array(xs), "xs"), numpy_helper.from_array(np.array(x_zp, np_x), "xz"),
             numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(scalar(ws), "ws"),
             numpy_helper.from_array(scalar(wz), "wz"), numpy_helper.from_array(b, "bq"),
             numpy_helper.from_array((xs * np.broadcast_to(ws, (cout,))).astype(np.float32), "bs"),
             numpy_helper.from_array(np.array(ys), "ys"), numpy_helper.from_array(np.array(x_zp, np_x), "yz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("DequantizeLinear", ["bq", "bs"], ["bd"], axis=0),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], kernel_shape=[3, 3], pads=list(pads))]
    last = "c"
    if act == "relu":
        nodes.append(helper.make_node("Relu", [last], ["a"]))
        last = "a"
    elif act == "clip":
        inits += [numpy_helper.from_array(np.array(0.0, np.float32), "lo"), numpy_helper.from_array(np.array(2.0, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["a"]))
        last = "a"
    elif act == "leaky":
        nodes.append(helper.make_node("LeakyRelu", [last], ["a"], alpha=0.1))
        last = "a"
    oh, ow = h + pads[0] + pads[2] - 2, w + pads[1] + pads[3] - 2
    if residual:   # the int8 residual: Q(c) + Q(r) -> QADD
        nodes += [helper.make_node("QuantizeLinear", [last, "ys", "yz"], ["cq"]),
                  helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["cd"]),
                  helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["rq"]),
                  helper.make_node("DequantizeLinear", ["rq", "ys", "yz"], ["rd"]),
                  helper.make_node("Add", ["cd", "rd"], ["s"])]
        last = "s"
    if out == "q":
        nodes += [helper.make_node("QuantizeLinear", [last, "ys", "yz"], ["yq"]),
                  helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    else:
        nodes.append(helper.make_node("Identity", [last], ["y"]))
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, cin, h, w])]
    if residual:
        ins.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [batch, cout, oh, ow]))
    return make_model(nodes, ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, cout, oh, ow])],
                      inits, opset=17)


def _conv_integer(cin: int, cout: int, h: int, w: int, pad: int) -> onnx.ModelProto:
    """ConvInteger: uint8 x with a zero point, int8 weights: raw int32 accumulators (QCONV without mult)."""
    rng = np.random.default_rng(cin + cout)
    wq = rng.integers(-128, 128, (cout, cin, 3, 3)).astype(np.int8)
    inits = [numpy_helper.from_array(wq, "w"), numpy_helper.from_array(np.array(131, np.uint8), "xz")]
    nodes = [helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], kernel_shape=[3, 3], pads=[pad] * 4)]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, cin, h, w])],
                      [helper.make_tensor_value_info("y", TensorProto.INT32, [1, cout, h + 2 * pad - 2, w + 2 * pad - 2])],
                      inits, opset=17)


def _packaged_for(m: onnx.ModelProto, out: Path, wino: bool, target: str) -> Path:
    old = quant.QWINOGRAD
    quant.QWINOGRAD = wino
    try:
        return package(m, target=target, out=out, verify=False)
    finally:
        quant.QWINOGRAD = old


def _packaged(m: onnx.ModelProto, out: Path, wino: bool) -> Path:
    return _packaged_for(m, out, wino, "web")


def _feeds(m: onnx.ModelProto, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for vi in m.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        out[vi.name] = (rng.integers(0, 256, shape).astype(np.uint8) if vi.type.tensor_type.elem_type == TensorProto.UINT8
                        else rng.uniform(-2.6, 2.6, shape).astype(np.float32))   # beyond the 8-bit range: saturation
    return out


CASES = {  # name: _model arguments
    "pad1_relu_i8": dict(cin=16, cout=16, h=8, w=8, pads=(1, 1, 1, 1), act="relu", x_u8=False, x_zp=0),
    "pad0_odd_hw_u8": dict(cin=19, cout=21, h=11, w=9, pads=(0, 0, 0, 0), act="none", x_u8=True, x_zp=128),
    "asym_pads_clip": dict(cin=17, cout=23, h=7, w=13, pads=(2, 0, 1, 3), act="clip", x_u8=False, x_zp=-5),
    "leaky_u8_zp": dict(cin=24, cout=18, h=10, w=6, pads=(1, 2, 0, 1), act="leaky", x_u8=True, x_zp=37),
    "u8_weights_zp": dict(cin=20, cout=30, h=9, w=9, pads=(1, 1, 1, 1), act="relu", x_u8=True, x_zp=255, w_u8=True),
    "per_tensor_batch2": dict(cin=33, cout=17, h=6, w=15, pads=(1, 1, 1, 1), act="none", x_u8=False, x_zp=127,
                              per_tensor=True, batch=2),
    "float_out": dict(cin=16, cout=19, h=5, w=5, pads=(1, 1, 1, 1), act="relu", x_u8=True, x_zp=3, out="f32"),
    "residual": dict(cin=18, cout=16, h=12, w=12, pads=(1, 1, 1, 1), act="relu", x_u8=False, x_zp=2, residual=True),
    "wide_many_blocks": dict(cin=64, cout=40, h=39, w=41, pads=(1, 1, 1, 1), act="relu", x_u8=True, x_zp=60),
}


@pytest.mark.parametrize("name", list(CASES))
def test_qwinograd_bit_identical_to_qconv(name: str, tmp_path: Path) -> None:
    """The Winograd bundle and the QCONV bundle of one QDQ model write the same bytes on every build, and they
    follow ONNX's DQ -> Conv -> Q (onnxruntime unoptimized) like QCONV does."""
    m = _model(**CASES[name], seed=len(name))
    a, b = _packaged(m, tmp_path / "wino", True), _packaged(m, tmp_path / "qconv", False)
    assert Op.QWINOGRAD_CONV in plan_ops(a) and Op.QCONV not in plan_ops(a)
    assert Op.QCONV in plan_ops(b) and Op.QWINOGRAD_CONV not in plan_ops(b)
    feeds = _feeds(m, 3)
    want = _ort(m, feeds, optimized=False)["y"]
    for variant in VARIANTS:
        ya, yb = load_bundle(a, variant).run(feeds)["y"], load_bundle(b, variant).run(feeds)["y"]
        assert ya.tobytes() == yb.tobytes(), (variant, np.abs(ya - yb).max())
        steps = np.abs(ya.astype(np.float64) - want) / 0.05
        assert steps.max() <= 2.0 + 1e-3 and (steps > 0.5).mean() < 0.02, (variant, steps.max())


def test_qwinograd_conv_integer_raw_accumulators(tmp_path: Path) -> None:
    """ConvInteger (int32 output, no requantization): the accumulators themselves, equal to onnxruntime's."""
    m = _conv_integer(21, 18, 9, 10, 1)
    a, b = _packaged(m, tmp_path / "wino", True), _packaged(m, tmp_path / "qconv", False)
    assert Op.QWINOGRAD_CONV in plan_ops(a)
    feeds = _feeds(m, 4)
    want = _ort(m, feeds, optimized=False)["y"]
    for variant in VARIANTS:
        ya, yb = load_bundle(a, variant).run(feeds)["y"], load_bundle(b, variant).run(feeds)["y"]
        np.testing.assert_array_equal(ya, want)
        assert ya.tobytes() == yb.tobytes(), variant


def test_qwinograd_only_where_exact(tmp_path: Path) -> None:
    """Kept as QCONV: fewer than 16 channels (as the float path), weights too big for the output plane (bundle
    size), and a 4x sum that could overflow int32."""
    small = _model(cin=8, cout=16, h=8, w=8, pads=(1, 1, 1, 1), act="relu", x_u8=False, x_zp=0)
    assert Op.QWINOGRAD_CONV not in plan_ops(_packaged(small, tmp_path / "s", True))
    big = _model(cin=64, cout=64, h=3, w=3, pads=(1, 1, 1, 1), act="none", x_u8=False, x_zp=0)   # 4096 > 400 * 9
    assert Op.QWINOGRAD_CONV not in plan_ops(_packaged(big, tmp_path / "b", True))
    g = dict(cin=1000, cout=16, h=30, w=30, oh=30, ow=30, group=1, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1)
    w = np.full((16, 1000, 3, 3), 127, np.int8)
    assert quant.qwinograd_eligible(g, w, np.zeros(16, np.int32))           # 4*9*1000*255*127 < 2^31
    assert not quant.qwinograd_eligible(g, w, np.full(16, -128, np.int32))  # |w - zp| = 255: it could wrap


def test_int8_models_use_qwinograd(tmp_path: Path) -> None:
    """The benchmark models' 3x3 stride-1 convs are QWINOGRAD_CONV (the models' outputs against onnxruntime are
    test_int8.py's test_int8_models_agree_with_onnxruntime)."""
    for name in ("cifar10net", "resnet18"):
        b = package(_qdq(name, "fusion"), out=tmp_path / name, verify=False, dynamic=False)
        assert plan_ops(b).count(Op.QWINOGRAD_CONV) >= 2, name


def test_qwinograd_refuses_hostile_params(tmp_path: Path) -> None:
    """Hostile parameter words / dims / scratch of a QWINOGRAD_CONV plan: refused or run cleanly under ASan +
    UBSan (host build) and without a wasm trap."""
    m = _model(**CASES["asym_pads_clip"])
    plan = (_packaged(m, tmp_path / "b", True) / "model.plan").read_bytes()
    check_hostile_params([plan], tmp_path, seed=7, n=200)


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None or shutil.which("qemu-aarch64") is None,
                    reason="gcc-aarch64-linux-gnu / qemu-user missing")
def test_qwinograd_aarch64_bit_identical(tmp_path: Path) -> None:
    """The NEON build (pi5 CLI under qemu) writes QCONV's bytes too, and the wasm build's."""
    from packager.targets import edge as E
    m = _model(**CASES["leaky_u8_zp"], seed=5)
    feeds = _feeds(m, 6)
    got = {}
    for wino in (True, False):
        b = _packaged_for(m, tmp_path / f"pi5_{wino}", wino, "pi5")
        assert (Op.QWINOGRAD_CONV in plan_ops(b)) == wino
        outs = json.loads((b / "manifest.json").read_text())["outputs"]
        got[wino] = E.run_cli(b, feeds, outs, qemu=E.qemu_cmd("pi5"))["y"]
    assert got[True].tobytes() == got[False].tobytes()
    wasm = load_bundle(_packaged(m, tmp_path / "web", True), "simd").run(feeds)["y"]
    assert got[True].tobytes() == wasm.tobytes()
