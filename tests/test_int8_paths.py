"""int8 kernel paths that must give the same bytes as the general ones (docs/int8.md, session 6):
QDEPTHWISE_CONV's 3x3 and 5-wide channel loops (stride 1: even/odd outputs from plain loads; stride 2: unphased plane; rows
under 8 storing into the next row) against the emscripten scalar build, which runs the general loop for every
channel; the GEMM's widened A chunks (K up to and past one chunk) against the scalar build's int8 reads; and QUANTIZE_LINEAR / DEQUANTIZE_LINEAR's vector loops (whole vectors + scalar tails, per tensor and
per axis) against numpy's exact float32 arithmetic."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.plan import layout
from packager.plan.opcodes import Op

from .conftest import make_model
from .test_int8 import _qdq_conv_model

DW_CASES = [  # group, cin, cout, k, stride, dil, pad, act, x dtype, zero point, hw
    (5, 5, 5, 3, 1, 1, 1, "clip", TensorProto.INT8, 0, 16),      # stride 1, whole vectors
    (5, 5, 5, 3, 1, 1, 1, "relu", TensorProto.UINT8, 128, 21),   # stride 1, overlapping row tail
    (5, 5, 5, 3, 1, 1, 1, "none", TensorProto.INT8, -7, 7),      # rows of 7: spill into the next row/channel
    (5, 5, 5, 3, 1, 1, 0, "relu", TensorProto.UINT8, 3, 9),      # no pads, rows of 7
    (5, 5, 5, 3, 1, 2, 2, "clip", TensorProto.INT8, 4, 13),      # dilated: the general loop
    (5, 5, 5, 3, 2, 1, 1, "relu", TensorProto.INT8, 0, 16),      # stride 2: unphased plane, dw3s2_channel
    (5, 5, 5, 3, 2, 1, 1, "none", TensorProto.UINT8, 100, 15),   # stride 2, odd, rows of 8
    (5, 5, 5, 3, 2, 1, 1, "clip", TensorProto.INT8, -2, 13),     # stride 2, rows of 7 (last channel phased)
    (5, 5, 5, 3, 1, 1, 1, "leaky", TensorProto.INT8, 0, 16),     # general epilogue: the general loop everywhere
    (5, 5, 5, 5, 1, 1, 2, "clip", TensorProto.INT8, 0, 16),      # 5x5, stride 1: dw5_channel's even/odd pairs
    (5, 5, 5, 5, 1, 1, 2, "relu", TensorProto.UINT8, 128, 21),   # 5x5, stride 1, overlapping row tail
    (5, 5, 5, 5, 1, 1, 2, "none", TensorProto.INT8, -7, 7),      # 5x5, rows of 7: spill into the next row/channel
    (5, 5, 5, 5, 2, 1, 2, "relu", TensorProto.INT8, 0, 16),      # 5x5, stride 2: unphased plane, dw5_channel
    (5, 5, 5, 5, 2, 1, 2, "none", TensorProto.UINT8, 100, 17),   # 5x5, stride 2, odd, rows of 9
    (5, 5, 5, 5, 2, 1, 2, "clip", TensorProto.INT8, -2, 13),     # 5x5, stride 2, rows of 7 (last channel phased)
    (5, 5, 5, 5, 1, 2, 4, "clip", TensorProto.INT8, 4, 13),      # 5x5 dilated: the general loop
]


@pytest.mark.parametrize("case", DW_CASES, ids=[f"s{c[4]}d{c[5]}p{c[6]}_{c[7]}_hw{c[10]}" for c in DW_CASES])
def test_depthwise_channel_loops_same_bytes_as_general_loop(case, tmp_path: Path) -> None:
    m = _qdq_conv_model(*case)
    out = package(m, out=tmp_path / "b", verify=False)
    assert Op.QDEPTHWISE_CONV in [n.op for n in layout.decode((out / "model.plan").read_bytes()).nodes]
    for seed in range(2):
        x = np.random.default_rng(seed).uniform(-3, 3, (1, case[1], case[10], case[10])).astype(np.float32)
        got = {v: load_bundle(out, v).run({"x": x})["y"].tobytes() for v in ("scalar", "simd", "relaxed")}
        assert got["simd"] == got["scalar"] and got["relaxed"] == got["scalar"]


GEMM_K_CASES = [  # cin, k: K = cin * k * k around the dot_i16x8 GEMM's widened A chunk (qgemm.c: 2304 pairs)
    (512, 3),   # K 4608: one chunk, widened once per panel for every tile
    (521, 3),   # K 4689: two chunks per tile, the last pair odd
    (9, 1),     # K 9: a short odd K
]


@pytest.mark.parametrize("cin,k", GEMM_K_CASES, ids=[f"K{c * k * k}" for c, k in GEMM_K_CASES])
def test_qgemm_widened_a_same_bytes_as_scalar(cin: int, k: int, tmp_path: Path) -> None:
    """The SIMD builds' GEMM (A widened to int16 pairs in chunks, load-splat rows) against the scalar build's, which
    reads the int8 panels directly: 12 output channels (3 panels), a 5x5 output (3 tiles + a 1-column tail)."""
    m = _qdq_conv_model(1, cin, 12, k, 2, 1, k // 2, "relu", TensorProto.UINT8, 128, hw=9)
    out = package(m, out=tmp_path / "b", verify=False)
    assert Op.QCONV in [n.op for n in layout.decode((out / "model.plan").read_bytes()).nodes]
    x = np.random.default_rng(cin).uniform(-3, 3, (1, cin, 9, 9)).astype(np.float32)
    got = {v: load_bundle(out, v).run({"x": x})["y"].tobytes() for v in ("scalar", "simd", "relaxed")}
    assert got["simd"] == got["scalar"] and got["relaxed"] == got["scalar"]


QDQ_CASES = [  # shape, axis (None: per tensor), dtype, zero point(s)
    ((1, 3, 5, 7), None, TensorProto.UINT8, 131),    # 105: whole vectors + a tail of 1
    ((2, 3, 4, 4), 1, TensorProto.INT8, (-3, 0, 7)),  # per axis, 16 per run
    ((1, 4, 3, 3), 1, TensorProto.UINT8, (0, 255, 17, 128)),  # per axis, 9 per run
    ((6,), None, TensorProto.INT8, -128),            # tail only
]


@pytest.mark.parametrize("case", QDQ_CASES, ids=[f"{'x'.join(map(str, c[0]))}_ax{c[1]}" for c in QDQ_CASES])
def test_quantize_dequantize_vector_loops_exact(case, tmp_path: Path) -> None:
    shape, axis, dt, zps = case
    np_q = np.uint8 if dt == TensorProto.UINT8 else np.int8
    n = 1 if axis is None else shape[axis]
    scale = (np.random.default_rng(1).random(n).astype(np.float32) * 0.05 + 0.01)
    zp = np.array(zps, np_q).reshape(-1)
    s_t, z_t = (scale[0], zp[0]) if axis is None else (scale, zp)
    inits = [numpy_helper.from_array(np.array(s_t, np.float32), "s"), numpy_helper.from_array(np.array(z_t, np_q), "z")]
    kw = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], **kw),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], **kw)]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))], inits, opset=17)
    out = package(m, out=tmp_path / "b", verify=False)
    ops = [nd.op for nd in layout.decode((out / "model.plan").read_bytes()).nodes]
    assert Op.QUANTIZE_LINEAR in ops and Op.DEQUANTIZE_LINEAR in ops
    x = np.random.default_rng(2).uniform(-9, 9, shape).astype(np.float32)
    x.reshape(-1)[:3] = [0.5 * scale[0], 1.5 * scale[0], -2.5 * scale[0]]   # ties: round half to even
    bshape = [1] * len(shape)
    if axis is not None:
        bshape[axis] = n
    s_b, z_b = scale.reshape(bshape), zp.astype(np.int32).reshape(bshape)
    info = np.iinfo(np_q)
    q = np.clip(np.rint(x / s_b).astype(np.int32) + z_b, info.min, info.max)
    want = ((q - z_b).astype(np.float32) * s_b).astype(np.float32)
    for v in ("scalar", "simd", "relaxed"):
        np.testing.assert_array_equal(load_bundle(out, v).run({"x": x})["y"], want, err_msg=v)


@pytest.mark.parametrize("kh,kw", [(1, 9), (9, 1)])
def test_depthwise_nine_taps_not_square_takes_general_loop(kh: int, kw: int, tmp_path: Path) -> None:
    """A 1x9 or 9x1 depthwise kernel has 9 taps like a 3x3 one: the 3x3 channel loops must not take it."""
    m = _qdq_conv_model(5, 5, 5, 3, 1, 1, 1, "relu", TensorProto.INT8, 0, 16)
    w = next(t for t in m.graph.initializer if t.name == "wq")
    w.CopyFrom(numpy_helper.from_array(np.random.default_rng(3).integers(-127, 128, (5, 1, kh, kw)).astype(np.int8), "wq"))
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    del conv.attribute[:]
    conv.attribute.extend([helper.make_attribute("group", 5), helper.make_attribute("kernel_shape", [kh, kw]),
                           helper.make_attribute("pads", [kh // 2, kw // 2, kh // 2, kw // 2])])
    out = package(m, out=tmp_path / "b", verify=False)
    assert Op.QDEPTHWISE_CONV in [n.op for n in layout.decode((out / "model.plan").read_bytes()).nodes]
    x = np.random.default_rng(0).uniform(-3, 3, (1, 5, 16, 16)).astype(np.float32)
    got = {v: load_bundle(out, v).run({"x": x})["y"].tobytes() for v in ("scalar", "simd", "relaxed")}
    assert got["simd"] == got["scalar"] and got["relaxed"] == got["scalar"]
