"""The int8 matrix-vector path (qgemv_i16 in wasm_kernels/src/kernels/qgemm.c): products with one output column
(a classifier as QCONV over a 1x1 output, MatMulInteger with one weight column) and a block's last 1-4 columns.
It runs 4 row panels (16 rows) per pass, then single panels, and stores whole panels through a vector epilogue:
M values around those groups, odd and even K, against numpy's integer products (int32 outputs) and, for the
requantized (QDQ) output, against the same conv computed by the 4 x 8 tiles (the same bytes)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.plan.opcodes import Op

from .conftest import VARIANTS, make_model, plan_ops
from .test_int8 import _ort, _qdq_conv_model


def _conv_integer(cin: int, cout: int, k: int, w_extra: int, wzp: bool, seed: int) -> tuple[onnx.ModelProto, dict]:
    """ConvInteger over a [1, cin, k, k + w_extra] uint8 input (zero point 131): output [1, cout, 1, 1 + w_extra]."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-128, 128, (cout, cin, k, k)).astype(np.int8)
    inits = {"w": w, "xz": np.array(131, np.uint8)}
    ins = ["x", "w", "xz"]
    if wzp:
        inits["wz"] = rng.integers(-20, 20, cout).astype(np.int8)
        ins.append("wz")
    nodes = [helper.make_node("ConvInteger", ins, ["y"], kernel_shape=[k, k])]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, cin, k, k + w_extra])],
                   [helper.make_tensor_value_info("y", TensorProto.INT32, [1, cout, 1, 1 + w_extra])],
                   [numpy_helper.from_array(v, n) for n, v in inits.items()], opset=17)
    return m, inits


CONV_CASES = [  # cin, cout (M), k, extra output columns (0: N = 1; 8: N = 9, one tail column), w zero points
    (3, 1, 1, 0, False),    # M = 1, K = 3
    (2, 3, 1, 0, False),    # M = 3, K = 2
    (5, 5, 1, 0, True),     # M = 5, K = 5, weight zero points (column sums)
    (7, 9, 3, 0, False),    # M = 9, K = 63
    (4, 13, 3, 0, False),   # M = 13, K = 36
    (9, 17, 3, 0, True),    # M = 17 (4 panels + 1 row), K = 81
    (16, 33, 2, 0, False),  # M = 33, K = 64
    (51, 20, 3, 0, False),  # M = 20 (one group of 4 panels + 1 panel), K = 459
    (3, 13, 3, 8, False),   # N = 9: 8 in a tile, the 9th as a matrix-vector product
    (6, 17, 1, 11, True),   # N = 12: 8 + 4 single columns
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[f"c{c[0]}_m{c[1]}_k{c[2]}_n{c[3] + 1}" + ("_wzp" if c[4] else "")
                                                 for c in CONV_CASES])
def test_conv_integer_matrix_vector_exact(case, tmp_path: Path) -> None:
    cin, cout, k, extra, wzp = case
    m, inits = _conv_integer(cin, cout, k, extra, wzp, seed=cin * 31 + cout)
    out = package(m, out=tmp_path / "b", verify=False)
    assert Op.QCONV in plan_ops(out)
    w = inits["w"].astype(np.int64) - (inits["wz"].astype(np.int64)[:, None, None, None] if wzp else 0)
    for seed in range(2):
        x = np.random.default_rng(seed).integers(0, 256, (1, cin, k, k + extra)).astype(np.uint8)
        if seed:
            x[:] = 255   # extreme: |x - zp| = 124 everywhere
        win = sliding_window_view(x[0].astype(np.int64) - 131, (k, k), axis=(1, 2))   # [cin, 1, ow, k, k]
        want = np.einsum("chwij,ocij->ohw", win, w)[None].astype(np.int32)
        for variant in VARIANTS:
            np.testing.assert_array_equal(load_bundle(out, variant).run({"x": x})["y"], want, err_msg=variant)


MATMUL_CASES = [(1, 6, 1), (3, 7, 1), (5, 33, 1), (9, 64, 1), (13, 5, 1), (17, 129, 1), (6, 20, 9), (11, 15, 12),
                (1, 40, 9)]


@pytest.mark.parametrize("w_input", [False, True], ids=["w_const", "w_input"])
@pytest.mark.parametrize("case", MATMUL_CASES, ids=[f"m{c[0]}_k{c[1]}_n{c[2]}" for c in MATMUL_CASES])
def test_matmul_integer_matrix_vector_exact(case, w_input: bool, tmp_path: Path) -> None:
    """MatMulInteger X [M, K] uint8 (zero point 7) by W [K, N] int8. A runtime W runs as QMATMUL (X packed, its
    zero point through column sums; N = 1 a matrix-vector product, N = 9, 12 single last columns); a constant W
    as QCONV on W^T packed at package time for one row (a matrix-vector product over W's panels) and for 8 rows or
    more (on X^T, between 8-bit transposes), else as QMATMUL."""
    M, K, N = case
    rng = np.random.default_rng(M * 100 + K)
    w = rng.integers(-128, 128, (K, N)).astype(np.int8)
    nodes = [helper.make_node("MatMulInteger", ["x", "w", "xz"], ["y"])]
    ins = [helper.make_tensor_value_info("x", TensorProto.UINT8, [M, K])]
    inits = [numpy_helper.from_array(np.array(7, np.uint8), "xz")]
    if w_input:
        ins.append(helper.make_tensor_value_info("w", TensorProto.INT8, [K, N]))
    else:
        inits.append(numpy_helper.from_array(w, "w"))
    m = make_model(nodes, ins, [helper.make_tensor_value_info("y", TensorProto.INT32, [M, N])], inits)
    out = package(m, out=tmp_path / "b", verify=False)
    ops = plan_ops(out)
    kernel = Op.QMATMUL if w_input or 1 < M < 8 else Op.QCONV   # 8+ rows: Xᵀ between 8-bit transposes
    assert kernel in ops and set(ops) <= {kernel, Op.TRANSPOSE}, ops
    x = rng.integers(0, 256, (M, K)).astype(np.uint8)
    feeds = {"x": x, "w": w} if w_input else {"x": x}
    want = ((x.astype(np.int64) - 7) @ w.astype(np.int64)).astype(np.int32)
    for variant in VARIANTS:
        np.testing.assert_array_equal(load_bundle(out, variant).run(feeds)["y"], want, err_msg=variant)


def _qdq_conv(cin: int, cout: int, k: int, w_in: int, act: str, x_dtype: int, x_zp: int) -> onnx.ModelProto:
    """test_int8's QDQ conv (k x k, stride 1, no pads) on an input [1, cin, k, w_in]: one output row of w_in - k + 1."""
    return _qdq_conv_model(1, cin, cout, k, 1, 1, 0, act, x_dtype, x_zp, hw=k, width=w_in)


QDQ_CASES = [  # cin, cout, k, act, x dtype, zero point
    (8, 13, 3, "relu", TensorProto.INT8, 0),       # K = 72, M = 13: 3 single panels (the last partial)
    (5, 17, 3, "none", TensorProto.UINT8, 128),    # K = 45 (odd), M = 17: a group of 4 panels + 1 row
    (33, 36, 2, "clip", TensorProto.INT8, -5),     # K = 132, M = 36: a group + 5th panel
    (7, 9, 1, "leaky", TensorProto.UINT8, 37),     # general epilogue (leaky_relu), K = 7, M = 9
    (3, 1, 3, "relu", TensorProto.INT8, 3),        # M = 1, K = 27
    (4, 19, 3, "clip", TensorProto.UINT8, 0),      # M = 19: a group of 4 panels + 3 rows
]


@pytest.mark.parametrize("case", QDQ_CASES, ids=[f"c{c[0]}_m{c[1]}_k{c[2]}_{c[3]}" for c in QDQ_CASES])
def test_qdq_conv_one_column_same_bytes_as_tiles(case, tmp_path: Path) -> None:
    """The fused QDQ conv over a 1x1 output (N = 1: matrix-vector product and its vector epilogue) writes the
    same bytes as the first column of the same conv over 16 output columns (4 x 8 tiles), in every build, and
    matches ONNX's QDQ semantics (onnxruntime unoptimized) to one output step."""
    cin, cout, k, act, dt, zp = case
    one = package(_qdq_conv(cin, cout, k, k, act, dt, zp), out=tmp_path / "one", verify=False)
    wide = package(_qdq_conv(cin, cout, k, k + 15, act, dt, zp), out=tmp_path / "wide", verify=False)
    assert Op.QCONV in plan_ops(one) and Op.QCONV in plan_ops(wide)
    m = _qdq_conv(cin, cout, k, k, act, dt, zp)
    for seed in range(2):
        xw = np.random.default_rng(seed).uniform(-3, 3, (1, cin, k, k + 15)).astype(np.float32)
        x = np.ascontiguousarray(xw[..., :k])
        want = _ort(m, {"x": x}, optimized=False)["y"]
        for variant in VARIANTS:
            got = load_bundle(one, variant).run({"x": x})["y"]
            tiles = load_bundle(wide, variant).run({"x": xw})["y"][..., :1]
            assert got.tobytes() == tiles.tobytes(), variant
            steps = np.abs(got.astype(np.float64) - want) / 0.05
            assert steps.max() <= 1.0 + 1e-3, (variant, steps.max())
