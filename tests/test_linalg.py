"""Conv / Gemm / MatMul kernels against onnxruntime on random shapes (edge tiles, groups, dilations,
strides, pads, 1-D conv, batched/broadcast matmul, 1-D operands), fused epilogues, and hostile plans."""
from __future__ import annotations

import copy
import dataclasses

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from packager import load_bundle, package
from packager.analyze import analyze
from packager.plan.opspec import ACT_GELU_TANH, ACT_RELU
from packager.reference import reference_run
from packager.errors import RuntimeFailure, UnsupportedError
from packager.lower import lower
from packager.lowering import REGISTRY
from packager.plan import layout
from packager.plan.opcodes import Op
from packager.runtime.wasm import WasmPlan
from packager.toolchain import WEB_RUNTIME

from .conftest import VARIANTS

TOL = 1e-4


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "t", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def _init(name, arr):
    return helper.numpy_helper.from_array(np.asarray(arr, np.float32), name) if hasattr(helper, "numpy_helper") \
        else onnx.numpy_helper.from_array(np.asarray(arr, np.float32), name)


def _run_all_variants(model, feeds, tmp_path, want=None, scaled_atol=0.0):
    """scaled_atol: an absolute tolerance of that times max|want| on top of TOL, for kernels whose rounding error
    scales with the operands rather than with each output (Winograd F(4x4, 3x3): about 3e-6 of the output range)."""
    out = package(model, target="web", out=tmp_path / "b", verify=False)
    if want is None:
        want = reference_run(model, feeds)
    for v in VARIANTS:
        got = load_bundle(out, v).run(feeds)
        for k, w in want.items():
            assert got[k].shape == w.shape, (v, k, got[k].shape, w.shape)
            atol = TOL + scaled_atol * float(np.abs(w).max())
            np.testing.assert_allclose(got[k], w, rtol=TOL, atol=atol, err_msg=f"variant {v}")
    return out


def _conv_model(x_shape, w_shape, bias=True, seed=0, **attrs):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(w_shape).astype(np.float32)
    inits = [onnx.numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(onnx.numpy_helper.from_array(rng.standard_normal(w_shape[0]).astype(np.float32), "b"))
        ins.append("b")
    node = helper.make_node("Conv", ins, ["y"], **attrs)
    m = _model([node], [_vi("x", x_shape)], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = onnx.shape_inference.infer_shapes(m)
    return m, {"x": rng.standard_normal(x_shape).astype(np.float32)}


CONV_CASES = [
    # x shape, w shape, attrs
    ((1, 3, 9, 11), (5, 3, 3, 3), dict(pads=[1, 1, 1, 1])),                       # odd M, N
    ((2, 8, 7, 7), (13, 8, 1, 1), {}),                                                # direct 1x1, N=49 edge
    ((1, 16, 10, 6), (7, 16, 1, 1), {}),                                              # N=60: 4-col + scalar edge
    ((1, 4, 12, 13), (9, 4, 3, 3), dict(strides=[2, 2], pads=[1, 0, 1, 2])),          # asym pads, stride
    ((1, 4, 15, 15), (6, 4, 3, 3), dict(dilations=[2, 3], pads=[2, 3, 2, 3])),        # dilation
    ((1, 6, 9, 9), (12, 2, 3, 3), dict(group=3, pads=[1, 1, 1, 1])),                  # groups
    ((1, 16, 14, 14), (16, 8, 3, 3), dict(group=2, pads=[1, 1, 1, 1])),              # 8-channel groups (RegNet): 2-row panel, 16 columns
    # grouped convolutions without im2col (conv.c gc_run): 4-row blocks of 1-3 rows, strides, dilations, several
    # chunks of output rows, batch; weights over its stack budget take im2col
    ((2, 12, 9, 10), (18, 4, 3, 3), dict(group=3, strides=[2, 2], pads=[1, 1, 1, 1])),  # grouped s2, 6 per group
    ((1, 8, 11, 9), (10, 4, 3, 2), dict(group=2, dilations=[2, 1], pads=[2, 1, 1, 0])),  # grouped dilated, 5 per group
    ((1, 6, 7, 7), (9, 2, 5, 5), dict(group=3, strides=[1, 2], pads=[2, 2, 2, 2])),      # grouped 5x5, mixed strides
    ((1, 16, 60, 60), (16, 8, 3, 3), dict(group=2, pads=[1, 1, 1, 1])),                  # grouped: 2 chunks of rows
    ((1, 16, 121, 117), (16, 8, 3, 3), dict(group=2, strides=[2, 2], pads=[0, 1, 1, 0])),  # grouped s2, 3 chunks
    ((2, 6, 25), (6, 3, 3), dict(group=2, pads=[1, 1])),                                 # 1-D grouped
    # weights read in place from the 6-row panels in row pairs: a pair's second row the panel's zero row (7 and 13
    # per group: the last pair starts a panel), a 4-row tile across two panels (13: rows 4-7)
    ((1, 14, 9, 9), (14, 7, 3, 3), dict(group=2, pads=[1, 1, 1, 1])),                  # grouped, 7 per group
    ((1, 26, 16, 15), (26, 13, 3, 3), dict(group=2, strides=[2, 2], pads=[1, 1, 1, 1])),  # grouped s2, 13 per group
    ((1, 128, 6, 6), (64, 64, 3, 3), dict(group=2, pads=[1, 1, 1, 1])),                  # grouped, weights too big: im2col
    ((1, 8, 9, 10), (8, 1, 3, 3), dict(group=8, pads=[1, 1, 1, 1])),                  # depthwise s1
    ((2, 5, 17, 19), (5, 1, 3, 3), dict(group=5, strides=[2, 2], pads=[1, 1, 1, 1])),  # depthwise s2
    ((1, 3, 11, 23), (3, 1, 5, 5), dict(group=3, pads=[2, 2, 2, 2], dilations=[1, 2])),  # depthwise 5x5
    ((1, 4, 8, 9), (4, 1, 3, 2), dict(group=4, strides=[1, 3], pads=[0, 1, 2, 0])),   # depthwise odd
    ((1, 4, 8, 8), (8, 1, 3, 3), dict(group=4, pads=[1, 1, 1, 1])),                   # channel multiplier 2
    ((1, 6, 7, 7), (6, 1, 3, 3), dict(group=6, pads=[1, 1, 1, 1])),                  # depthwise 7x7: overlapping last vector
    ((2, 3, 3, 3), (3, 1, 3, 3), dict(group=3, pads=[1, 1, 1, 1])),                  # depthwise OW < 4: scalar tail
    ((1, 5, 14, 14), (5, 1, 3, 3), dict(group=5, strides=[2, 2], pads=[1, 1, 1, 1])),  # depthwise s2, 14 wide: scalar fill tail
    ((1, 4, 13, 15), (4, 1, 3, 3), dict(group=4, strides=[2, 2], pads=[0, 1, 2, 0])),  # depthwise s2, odd, asym pads
    ((1, 3, 9, 10), (3, 1, 3, 3), dict(group=3, pads=[2, 2, 2, 2], dilations=[2, 2])),  # depthwise dilated 3x3
    ((1, 3, 6, 22), (3, 1, 3, 3), dict(group=3, strides=[1, 3], pads=[1, 2, 1, 2])),  # depthwise sw 3: generic fill
    ((1, 3, 6, 21), (3, 1, 3, 3), dict(group=3, pads=[1, 0, 1, 2])),                # depthwise row pairs, 8 + 8 + overlap
    ((1, 3, 5, 8), (3, 1, 3, 3), dict(group=3, strides=[2, 2], pads=[1, 1, 1, 1])),   # depthwise s2 fill: W = 8
    ((1, 3, 7, 9), (3, 1, 3, 3), dict(group=3, strides=[2, 2], pads=[1, 1, 1, 1])),   # s2 fill: odd W, last column scalar
    ((1, 3, 5, 10), (3, 1, 3, 3), dict(group=3, strides=[2, 2], pads=[1, 0, 1, 1])),  # s2 fill: overlapping last 8
    ((1, 3, 6, 17), (3, 1, 3, 3), dict(group=3, strides=[2, 2], pads=[0, 1, 1, 0])),  # s2 fill: odd W past 16
    ((1, 2, 7, 5), (2, 1, 3, 3), dict(group=2, pads=[1, 1, 1, 1])),                   # row pairs, odd OH, OW = 5
    ((1, 12, 5, 8), (12, 12, 1, 1), {}),                                              # 6x16 tiles then one 6x8 (N=40)
    # 1x1 over planes whose rows are a multiple of 4 KB apart: B copied in blocks of 80 / 16 columns (gemm.c
    # pack_block), the last 48 of 2048 columns read in place; 2- and 1-row edge panels
    ((1, 36, 32, 64), (20, 36, 1, 1), {}),
    ((1, 192, 32, 32), (13, 192, 1, 1), {}),
    ((1, 3, 20), (4, 3, 5), dict(pads=[2, 1], strides=[2])),                          # 1-D
    ((2, 4, 31), (4, 1, 3), dict(group=4, strides=[2], auto_pad="SAME_UPPER")),       # 1-D depthwise
    ((1, 3, 10, 9), (4, 3, 3, 3), dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    ((1, 3, 10, 9), (4, 3, 4, 4), dict(auto_pad="SAME_LOWER", strides=[2, 2])),
    ((1, 3, 10, 9), (4, 3, 3, 2), dict(auto_pad="VALID")),
    ((1, 20, 6, 6), (70, 20, 3, 3), dict(pads=[1, 1, 1, 1])),                         # several panels of M
    ((1, 300, 5, 5), (10, 300, 3, 3), dict(pads=[1, 1, 1, 1])),                       # deep K
    ((1, 800, 9, 9), (4, 800, 3, 3), dict(pads=[1, 1, 1, 1])),                        # deep K: im2col panels (64 columns) start mid-row
]


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
def test_conv_random(xs, ws, attrs, tmp_path):
    m, feeds = _conv_model(xs, ws, **attrs)
    _run_all_variants(m, feeds, tmp_path)


def test_conv_no_bias_large_panel(tmp_path):
    m, feeds = _conv_model((1, 16, 40, 40), (24, 16, 3, 3), bias=False, pads=[1, 1, 1, 1])
    _run_all_variants(m, feeds, tmp_path)


def test_conv_3d_rejected(tmp_path):
    m, _ = _conv_model((1, 2, 4, 4, 4), (3, 2, 2, 2, 2))
    with pytest.raises(UnsupportedError):
        package(m, target="web", out=tmp_path / "b", verify=False)


@pytest.mark.parametrize("act,params,ref", [
    (1, (), lambda v: np.maximum(v, 0)),
    (2, (0.1,), lambda v: np.where(v < 0, 0.1 * v, v)),
    (3, (0.0, 6.0), lambda v: np.clip(v, 0, 6)),
])
@pytest.mark.parametrize("kind", ["conv", "conv1x1", "dw", "dw7", "gconv", "gemm"])
def test_fused_epilogue(kind, act, params, ref, tmp_path, monkeypatch):
    """The fusion pass's entry points: activation + residual applied in the kernel epilogue."""
    from packager.ops.conv import emit_conv
    from packager.ops.linalg import emit_gemm
    rng = np.random.default_rng(1)
    if kind == "gemm":
        a = rng.standard_normal((5, 19)).astype(np.float32)
        w = rng.standard_normal((13, 19)).astype(np.float32)
        c = rng.standard_normal(13).astype(np.float32)
        node = helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1)
        inits = [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(c, "c")]
        x, yshape = a, (5, 13)
        base = a @ w.T + c
        op, emit = "Gemm", emit_gemm
    else:
        xs, ws, attrs = {"conv": ((1, 6, 9, 11), (10, 6, 3, 3), {}), "dw": ((1, 6, 9, 11), (6, 1, 3, 3), {"group": 6}),
                         "dw7": ((1, 8, 7, 7), (8, 1, 3, 3), {"group": 8}),
                         "gconv": ((1, 16, 9, 11), (14, 8, 3, 3), {"group": 2}),
                         "conv1x1": ((1, 24, 32, 32), (10, 24, 1, 1), {})}[kind]   # B in copied blocks
        m0, f0 = _conv_model(xs, ws, seed=2, pads=[0 if kind == "conv1x1" else 1] * 4, **attrs)
        base = reference_run(m0, f0)["y"]
        x, yshape = f0["x"], base.shape
        node = m0.graph.node[0]
        inits = list(m0.graph.initializer)
        op, emit = "Conv", emit_conv
    r = rng.standard_normal(yshape).astype(np.float32)
    m = _model([node], [_vi("x", x.shape), _vi("r", yshape)], [_vi("y", yshape)], inits)
    monkeypatch.setitem(REGISTRY, op, lambda ctx, n: emit(ctx, n, activation=(act, params), residual="r"))
    _run_all_variants(m, {"x": x, "r": r}, tmp_path, want={"y": ref(base + r).astype(np.float32)})


WINOGRAD_CASES = [
    # x shape, w shape, pads: odd sizes, pads 0/1/asymmetric, batch, edge tiles (odd OH/OW, partial groups);
    # each runs as F(2x2, 3x3) and as F(4x4, 3x3) (edge tiles of 1..3 rows/columns, groups of 1..4 tiles)
    ((1, 16, 9, 11), (16, 16, 3, 3), [1, 1, 1, 1]),
    ((1, 16, 8, 8), (20, 16, 3, 3), [0, 0, 0, 0]),
    ((1, 17, 10, 7), (19, 17, 3, 3), [0, 1, 2, 0]),
    ((2, 16, 5, 13), (16, 16, 3, 3), [1, 0, 0, 1]),
    ((1, 24, 3, 3), (16, 24, 3, 3), [0, 0, 0, 0]),              # a single 1x1 output
    ((1, 16, 4, 30), (16, 16, 3, 3), [3, 2, 0, 5]),            # pads larger than a tile
    ((1, 32, 30, 33), (40, 32, 3, 3), [1, 1, 1, 1]),           # several tile blocks
]


def _ops(model) -> list[Op]:
    return [Op(n.op) for n in _lowered(model).plan.nodes]


def _winograd_tile(monkeypatch, m: int) -> Op:
    """Make every eligible conv F(m x m, 3x3); the kernel id it lowers to."""
    import packager.ops.conv as conv
    monkeypatch.setattr(conv, "WINOGRAD_F4", m == 4)
    monkeypatch.setattr(conv, "WINOGRAD_F4_MIN_TILES", 1)
    monkeypatch.setattr(conv, "WINOGRAD_F4_MIN_CHANNEL_PAIRS", 1)
    return Op.WINOGRAD_CONV_F4 if m == 4 else Op.WINOGRAD_CONV


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("xs,ws,pads", WINOGRAD_CASES)
def test_winograd_random(xs, ws, pads, tile, tmp_path, monkeypatch):
    op = _winograd_tile(monkeypatch, tile)
    m, feeds = _conv_model(xs, ws, pads=pads, seed=5)
    assert op in _ops(m)
    _run_all_variants(m, feeds, tmp_path, scaled_atol=1e-5 if tile == 4 else 0.0)


@pytest.mark.parametrize("tile", [2, 4])
def test_winograd_small_blocks(tile, tmp_path, monkeypatch):
    """Blocks of 16 tiles that start and end mid tile row (TW = 9 for F(2x2), 5 for F(4x4))."""
    import packager.ops.conv as conv
    op = _winograd_tile(monkeypatch, tile)
    monkeypatch.setattr(conv, "WINOGRAD_SCRATCH_FLOATS", 1024)
    m, feeds = _conv_model((1, 16, 13, 17), (18, 16, 3, 3), pads=[1, 1, 0, 0], seed=6)
    assert op in _ops(m)
    _run_all_variants(m, feeds, tmp_path)


def test_winograd_not_below_threshold():
    m, _ = _conv_model((1, 8, 9, 9), (16, 8, 3, 3), pads=[1, 1, 1, 1])
    assert Op.WINOGRAD_CONV not in _ops(m) and Op.CONV in _ops(m)
    m, _ = _conv_model((1, 16, 9, 9), (16, 16, 3, 3), strides=[2, 2], pads=[1, 1, 1, 1])
    assert Op.WINOGRAD_CONV not in _ops(m)


def test_winograd_tile_choice():
    """F(4x4) on planes of 16 or more 4x4 tiles with 64x64 channel pairs or more, its U made by a WINOGRAD_FILTER
    prologue from the taps the plan carries (9 floats a filter, not 36); F(2x2), U in the plan, elsewhere."""
    ops = _ops(_conv_model((1, 128, 14, 14), (128, 128, 3, 3), pads=[1, 1, 1, 1])[0])
    assert ops == [Op.WINOGRAD_FILTER, Op.WINOGRAD_CONV_F4]
    assert _ops(_conv_model((1, 128, 12, 12), (128, 128, 3, 3), pads=[1, 1, 1, 1])[0]) == [Op.WINOGRAD_CONV]
    assert _ops(_conv_model((1, 64, 16, 16), (64, 64, 3, 3), pads=[1, 1, 1, 1])[0]) == [Op.WINOGRAD_FILTER,
                                                                                 Op.WINOGRAD_CONV_F4]
    assert _ops(_conv_model((1, 32, 32, 32), (32, 32, 3, 3), pads=[1, 1, 1, 1])[0]) == [Op.WINOGRAD_CONV]


@pytest.mark.parametrize("act,params,ref", [
    (1, (), lambda v: np.maximum(v, 0)),
    (2, (0.1,), lambda v: np.where(v < 0, 0.1 * v, v)),
    (3, (-0.5, 6.0), lambda v: np.clip(v, -0.5, 6)),
])
@pytest.mark.parametrize("tile", [2, 4])
def test_winograd_fused_residual(act, params, ref, tile, tmp_path, monkeypatch):
    from packager.ops.conv import emit_conv
    op = _winograd_tile(monkeypatch, tile)
    m0, f0 = _conv_model((1, 16, 11, 9), (18, 16, 3, 3), seed=7, pads=[1, 1, 1, 1])
    base = reference_run(m0, f0)["y"]
    r = np.random.default_rng(8).standard_normal(base.shape).astype(np.float32)
    m = _model([m0.graph.node[0]], [_vi("x", f0["x"].shape), _vi("r", base.shape)], [_vi("y", base.shape)],
               list(m0.graph.initializer))
    monkeypatch.setitem(REGISTRY, "Conv", lambda ctx, n: emit_conv(ctx, n, activation=(act, params), residual="r"))
    assert op in _ops(m)
    _run_all_variants(m, {"x": f0["x"], "r": r}, tmp_path, want={"y": ref(base + r).astype(np.float32)})


GEMM_CASES = [
    # A shape, B shape, C shape or None, attrs, B constant?
    ((1, 37), (37, 29), (29,), {}, True),
    ((7, 5), (11, 5), (7, 11), dict(transB=1, alpha=0.5, beta=2.0), True),
    ((9, 13), (13, 17), (1,), dict(transA=1, alpha=1.5), False),
    ((13, 9), (21, 9), (13, 1), dict(transA=1, transB=1, beta=-1.0), False),
    ((6, 8), (8, 4), None, {}, False),
    ((3, 300), (300, 70), (1, 70), {}, True),
    # M >= 16: B multiplied from 16-column panels (matmul.c pack_b), N not a multiple of 16
    ((20, 37), (37, 29), (29,), dict(alpha=0.5, beta=2.0), True),
    ((33, 300), (300, 70), (33, 70), {}, False),
    ((18, 30), (30, 19), (19,), dict(transA=1), True),    # transposed A packed in 4-row groups (wasm SIMD)
    # M = 1 with B as [N, K] rows: dot products (runtime B^T; transA's [K, 1] A; bias, alpha, beta)
    ((1, 50), (70, 50), (70,), dict(transB=1, alpha=0.5, beta=-1.0), False),
    ((1, 40), (40, 21), (1,), dict(transA=1), True),
]


def _a_b_operands(a: np.ndarray, b: np.ndarray, bconst: bool) -> tuple[dict, list, list]:
    """(feeds, initializers, graph inputs) for inputs "a" and "b"; b is an initializer when bconst."""
    feeds, inits, ins = {"a": a}, [], [_vi("a", a.shape)]
    if bconst:
        inits.append(onnx.numpy_helper.from_array(b, "b"))
    else:
        feeds["b"] = b
        ins.append(_vi("b", b.shape))
    return feeds, inits, ins


@pytest.mark.parametrize("sa,sb,sc,attrs,bconst", GEMM_CASES)
def test_gemm_random(sa, sb, sc, attrs, bconst, tmp_path):
    rng = np.random.default_rng(3)
    if attrs.get("transA"):
        sa = sa[::-1]
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    feeds, inits, ins = _a_b_operands(a, b, bconst)
    names = ["a", "b"]
    if sc is not None:
        c = rng.standard_normal(sc).astype(np.float32)
        feeds["c"] = c
        ins.append(_vi("c", sc))
        names.append("c")
    node = helper.make_node("Gemm", names, ["y"], **attrs)
    m = onnx.shape_inference.infer_shapes(_model([node], ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits))
    _run_all_variants(m, feeds, tmp_path)


MATMUL_CASES = [
    ((7, 9), (9, 13), False),
    ((2, 3, 5, 7), (7, 11), True),            # batch folded into M, constant B
    ((2, 1, 5, 7), (3, 7, 6), False),         # broadcast batch both ways
    ((4, 6), (3, 6, 5), False),               # 2-D A against batched B
    ((9,), (9, 4), False),                    # 1-D A
    ((2, 3, 9), (9,), False),                 # 1-D B
    ((9,), (9,), False),                      # dot product
    ((1, 64, 33), (1, 33, 65), False),
    ((3, 1, 17), (17, 1), True),
    # M >= 16: B from 16-column panels, repacked per batch where B differs
    ((40, 24), (24, 70), True),
    ((2, 1, 18, 7), (3, 7, 35), False),
    ((17, 5), (5, 3), True),
    # A larger than B's panels (attention's P*V): each A row group against every panel (matmul.c a_outer)
    ((2, 3, 45, 45), (2, 3, 45, 20), False),
    ((50, 40), (40, 9), True),
]


@pytest.mark.parametrize("sa,sb,bconst", MATMUL_CASES)
def test_matmul_random(sa, sb, bconst, tmp_path):
    rng = np.random.default_rng(4)
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    feeds, inits, ins = _a_b_operands(a, b, bconst)
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    m = onnx.shape_inference.infer_shapes(_model([node], ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits))
    _run_all_variants(m, feeds, tmp_path)


# The relaxed build's 6 x 8 tiles (matmul.c TILE6): every A row-group tail (M mod 6 = 0..5, and M < 6 rows after
# 16 in a batch), N with partial 8-column halves, and each epilogue form: column bias, residual, relu / clip (the
# vector path), leaky relu and GELU (element-wise and after the task), GEMM's alpha, beta and row/full bias.
@pytest.mark.parametrize("m", [16, 17, 18, 19, 20, 21, 22, 23, 26, 31])
def test_matmul_tile_row_groups(m, tmp_path, monkeypatch):
    from packager.ops.linalg import emit_matmul
    rng = np.random.default_rng(m)
    k, n = 11, 29 + m % 3 * 8
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    r = rng.standard_normal((m, n)).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32) if m % 2 == 0 else np.zeros(n, np.float32)
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    mod = _model([node], [_vi("x", a.shape), _vi("r", r.shape), _vi("c", c.shape)], [_vi("y", (m, n))],
                 [onnx.numpy_helper.from_array(w, "w")])
    act, params, ref = [(0, (), lambda v: v), (1, (), lambda v: np.maximum(v, 0)),
                        (2, (0.1,), lambda v: np.where(v < 0, 0.1 * v, v)), (3, (-1.0, 2.0), lambda v: np.clip(v, -1, 2))][m % 4]
    monkeypatch.setitem(REGISTRY, "MatMul", lambda ctx, nd: emit_matmul(ctx, nd, bias="c" if m % 2 == 0 else None,
                                                                           activation=(act, params), residual="r"))
    _run_all_variants(mod, {"x": a, "r": r, "c": c}, tmp_path, want={"y": ref(a @ w + c + r).astype(np.float32)})


# One row by a constant B (a decoder's token step): GEMM's GEMV with B stored as [N, K], fused epilogues included
# (relu in the dot products' epilogue; GPT-2's tanh GELU out of line, once over each chunk of outputs); a B that
# is the transpose of a stored table (GPT-2's tied embedding) is not stored a second time.
@pytest.mark.parametrize("sa,fused", [((1, 1, 37), None), ((37,), None), ((1, 37), "relu"), ((1, 1, 37), "relu"),
                                      ((1, 37), "gelu_tanh")])
def test_matmul_one_row_gemv(sa, fused, tmp_path, monkeypatch):
    from packager.ops.linalg import emit_matmul
    rng = np.random.default_rng(8)
    n, k = 70, sa[-1]
    table = rng.standard_normal((n, k)).astype(np.float32)
    a = rng.standard_normal(sa).astype(np.float32)
    c, r = rng.standard_normal(n).astype(np.float32), rng.standard_normal((*sa[:-1], n)).astype(np.float32)
    ids = np.array([3], np.int64)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"]), helper.make_node("MatMul", ["a", "w"], ["y"])]
    mod = _model(nodes, [_vi("a", sa), _vi("r", r.shape), _vi("c", c.shape),
                         helper.make_tensor_value_info("ids", TensorProto.INT64, [1])],
                 [_vi("y", r.shape), _vi("e", (1, k))],
                 [onnx.numpy_helper.from_array(table, "table"), onnx.numpy_helper.from_array(np.ascontiguousarray(table.T), "w")])
    want = a @ table.T
    if fused:
        code, act = {"relu": (ACT_RELU, lambda v: np.maximum(v, 0)),
                     "gelu_tanh": (ACT_GELU_TANH, lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3))))}[fused]
        monkeypatch.setitem(REGISTRY, "MatMul", lambda ctx, nd: emit_matmul(ctx, nd, bias="c", activation=(code, ()),
                                                                               residual="r"))
        want = act(want.astype(np.float64) + c + r)
    out = _run_all_variants(mod, {"a": a, "r": r, "c": c, "ids": ids}, tmp_path,
                            want={"y": want.astype(np.float32), "e": table[ids]})
    plan = layout.decode((out / "model.plan").read_bytes())
    assert Op.MATMUL not in {nd.op for nd in plan.nodes}
    (gemm,) = [nd for nd in plan.nodes if nd.op == Op.GEMM]
    (gather,) = [nd for nd in plan.nodes if nd.op == Op.GATHER]
    assert gemm.params[1] == 1 and gemm.inputs[1] == gather.inputs[0]   # transB, and the table stored once


# The GEMV's four streams (matmul.c gemv_task: rows i, i + Q, i + 2Q, i + 3Q of a chunk, Q = rows // 4, then the
# chunk's last 0-3 rows one by one): fewer than four rows (no stream pass), N mod 4 = 0..3, K below one 8-float
# step, K mod 8 in the 4-float and scalar tails; a column bias and relu through the epilogue.
GEMV_SHAPES = [(1, 5), (3, 8), (4, 1), (5, 9), (8, 4), (13, 12), (66, 37), (67, 771), (300, 16)]


def _gemv_model(n: int, k: int, seed: int = 11):
    rng = np.random.default_rng(seed + n * 1000 + k)
    a = rng.standard_normal((1, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["a", "w", "c"], ["g"]), helper.make_node("Relu", ["g"], ["y"])]
    mod = _model(nodes, [_vi("a", a.shape)], [_vi("y", (1, n))],
                 [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(c, "c")])
    return mod, {"a": a}, {"y": np.maximum(a.astype(np.float64) @ w + c, 0).astype(np.float32)}


@pytest.mark.parametrize("n,k", GEMV_SHAPES)
def test_gemv_streams(n, k, tmp_path):
    mod, feeds, want = _gemv_model(n, k)
    out = _run_all_variants(mod, feeds, tmp_path, want=want)
    (gemm,) = [nd for nd in layout.decode((out / "model.plan").read_bytes()).nodes if nd.op == Op.GEMM]
    assert gemm.params[1] == 1   # B stored as [N, K]: the GEMV path


def test_gemv_streams_threads(tmp_path):
    # 2 threads: 8 chunks of N, each read as four streams of its own (chunks of 37-38 rows, K with a tail)
    from .test_web_node import RELAXED_FLAG, _node_major, _node_run, _outputs
    if _node_major() < 20:
        pytest.skip("needs Node >= 20")
    mod, feeds, want = _gemv_model(301, 45)
    path = package(mod, target="web", out=tmp_path / "b", verify=False)
    res = _node_run(tmp_path / "n", path, feeds, "auto", options={"threads": 2}, node_flags=(RELAXED_FLAG,))
    assert res["variant"].startswith("threads")
    np.testing.assert_allclose(_outputs(res)["y"], want["y"], rtol=TOL, atol=TOL)


@pytest.mark.parametrize("sc,attrs", [((40,), dict(alpha=0.5, beta=2.0)), ((19, 1), dict(beta=-1.0)), ((19, 40), {}),
                                      ((1,), dict(alpha=-2.0))])
def test_gemm_tile_epilogues(sc, attrs, tmp_path):
    rng = np.random.default_rng(7)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((19, 23), (23, 40), sc))
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], **attrs)
    m = _model([node], [_vi("a", a.shape), _vi("c", sc)], [_vi("y", (19, 40))], [onnx.numpy_helper.from_array(b, "b")])
    _run_all_variants(m, {"a": a, "c": c}, tmp_path)


@pytest.mark.parametrize("variant", VARIANTS)
def test_matmul_runs_plans_with_six_row_scratch(variant, tmp_path, monkeypatch):
    # Plans from before the 4-row A groups reserved room for EP_GEMM_MR-row panels only: the kernel must
    # fall back to that layout, not read past the scratch. (Plans from before B_PANELS: row-major constant B.)
    monkeypatch.setattr("packager.ops.linalg.PACK_CONST_B", False)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((42, 24)).astype(np.float32), rng.standard_normal((24, 70)).astype(np.float32)
    m = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], [_vi("a", a.shape)], [_vi("y", (42, 70))],
               [onnx.numpy_helper.from_array(b, "b")])
    out = package(m, target="web", out=tmp_path / "b", verify=False)
    plan = layout.decode((out / "model.plan").read_bytes())
    (node,) = [n for n in plan.nodes if n.op == Op.MATMUL]
    old = -(-42 // 6) * 6 * 24 * 4 + -(-70 // 16) * 16 * 24 * 4
    assert node.scratch_bytes > old
    node.scratch_bytes = old
    s = WasmPlan(out / WEB_RUNTIME_FILES[variant], layout.encode(plan))
    s.write(plan.inputs[0], a)
    s.run()
    np.testing.assert_allclose(s.read(plan.outputs[0], np.float32, (42, 70)), a @ b, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("panels", [True, False])
def test_matmul_b_panels_plan(variant, panels, tmp_path, monkeypatch):
    # A constant B is stored as 16-column panels (5th param B_PANELS = 1, tensor [ceil(N/16), K, 16]): no copy per
    # run; plans from before it (row-major B, 0 or 4 params) still run; A with batch dims folded into M.
    from packager.ops.linalg import panels_b
    monkeypatch.setattr("packager.ops.linalg.PACK_CONST_B", panels)
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((2, 20, 24)).astype(np.float32), rng.standard_normal((24, 37)).astype(np.float32)
    m = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], [_vi("a", a.shape)], [_vi("y", (2, 20, 37))],
               [onnx.numpy_helper.from_array(b, "b")])
    out = package(m, target="web", out=tmp_path / "b", verify=False)
    plan = layout.decode((out / "model.plan").read_bytes())
    (node,) = [n for n in plan.nodes if n.op == Op.MATMUL]
    assert len(node.params) == (6 if panels else 0)
    if panels:
        assert node.params[4:] == [1, 37]   # B_PANELS, then N (the panels round it up)
        t = plan.tensors[node.inputs[1]]
        assert tuple(t.dims) == (3, 24, 16)
        assert panels_b(b).shape == (3, 24, 16) and not panels_b(b)[2, :, 5:].any()
    s = WasmPlan(out / WEB_RUNTIME_FILES[variant], layout.encode(plan))
    s.write(plan.inputs[0], a)
    s.run()
    np.testing.assert_allclose(s.read(plan.outputs[0], np.float32, (2, 20, 37)), a @ b, rtol=TOL, atol=TOL)


WEB_RUNTIME_FILES = {"simd": "edgepack.wasm", "relaxed": "edgepack-relaxed.wasm", "scalar": "edgepack-scalar.wasm"}


# ------------------------------------------------------------------------------------------ hostile plans

def _lowered(model):
    return lower(analyze(model, None, None))


def _open(plan: layout.Plan) -> None:
    WasmPlan(WEB_RUNTIME["edgepack.wasm"], layout.encode(plan))


def _mutations(plan: layout.Plan, op: Op):
    """Yield (description, corrupted plan) for the first node of kernel `op`."""
    idx = next(i for i, n in enumerate(plan.nodes) if n.op == int(op))
    node = plan.nodes[idx]
    for i in range(len(node.params)):
        for val in (-1, 0, 2**31 - 1, node.params[i] + 1, node.params[i] * 3 + 7):
            val = (val + 2**31) % 2**32 - 2**31   # wrap to an int32 word
            if val == node.params[i]:
                continue
            p = copy.deepcopy(plan)
            p.nodes[idx].params[i] = val
            yield f"param[{i}]={val}", p, i
    if node.params:
        p = copy.deepcopy(plan)
        p.nodes[idx].params = p.nodes[idx].params[:-1]
        yield "short params", p, None
    p = copy.deepcopy(plan)
    p.nodes[idx].params = p.nodes[idx].params + [0]
    yield "long params", p, None
    if node.scratch_bytes:
        p = copy.deepcopy(plan)
        p.nodes[idx].scratch_bytes = node.scratch_bytes - 4
        yield "scratch too small", p, None


# Parameter counts of a kernel's older forms: a plan cut to one of them reads as that form (the words past it only
# serve run-time shapes), which must run to completion.
OLDER_FORMS = {Op.CONV: {16}, Op.WINOGRAD_CONV: {15}, Op.MATMUL: {5}}

# Params whose change cannot make run() go out of bounds (values / flags inside a checked range).
BENIGN = {
    Op.CONV: {14, 15},                 # activation p0/p1 (floats)
    Op.DEPTHWISE_CONV: {11, 12},
    Op.GEMM: {2, 3, 6, 7},             # alpha, beta, p0, p1
    Op.MATMUL: {2, 3},                 # fused epilogue's p0, p1
    Op.WINOGRAD_CONV: {13, 14},
}


@pytest.mark.parametrize("which", ["conv", "dw", "gemm", "matmul", "matmul_fused", "wino"])
def test_hostile_params_rejected(which, monkeypatch):
    # scratch sized for one thread, so that 4 bytes less is too little (the packager gives several threads'
    # worth to DEPTHWISE_CONV and WINOGRAD_CONV; the kernels use as many threads as it holds)
    import packager.ops.conv as conv_ops
    monkeypatch.setattr(conv_ops, "THREAD_SLOTS", 1)
    if which == "wino":
        m, _ = _conv_model((1, 16, 9, 7), (16, 16, 3, 3), pads=[1, 0, 1, 2])
        op = Op.WINOGRAD_CONV
    elif which in ("conv", "dw"):
        ws = (6, 4, 3, 3) if which == "conv" else (4, 1, 3, 3)
        m, _ = _conv_model((1, 4, 9, 9), ws, group=1 if which == "conv" else 4, strides=[2, 2], pads=[1, 1, 1, 1])
        op = Op.CONV if which == "conv" else Op.DEPTHWISE_CONV
    elif which == "gemm":
        node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1)
        m = _model([node], [_vi("a", (3, 5)), _vi("b", (4, 5)), _vi("c", (4,))], [_vi("y", (3, 4))])
        op = Op.GEMM
    elif which == "matmul_fused":   # bias + residual + activation: MATMUL's 4 epilogue params
        nodes = [helper.make_node("MatMul", ["a", "b"], ["p"]), helper.make_node("Add", ["p", "c"], ["q"]),
                 helper.make_node("Add", ["q", "r"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
        m = _model(nodes, [_vi("a", (2, 3, 5)), _vi("b", (5, 4)), _vi("r", (2, 3, 4))], [_vi("y", (2, 3, 4))],
                   [_init("c", np.arange(4))])
        op = Op.MATMUL
    else:
        node = helper.make_node("MatMul", ["a", "b"], ["y"])
        m = _model([node], [_vi("a", (2, 3, 5)), _vi("b", (5, 4))], [_vi("y", (2, 3, 4))])
        op = Op.MATMUL
    plan = _lowered(m).plan
    _open(plan)  # the genuine plan opens
    bad_accepted = []
    for desc, p, i in _mutations(plan, op):
        try:
            _open(p)
        except RuntimeFailure:
            continue
        # Accepted: only a consistent reinterpretation is allowed (e.g. a pad that gives the same output
        # size, a group count whose packed weights have the same size, another valid activation code).
        # Those must never be out-of-range values, and must run to completion.
        v = p.nodes[[n.op for n in p.nodes].index(int(op))].params[i] if i is not None else None
        older = desc == "short params" and len(p.nodes[[n.op for n in p.nodes].index(int(op))].params) in OLDER_FORMS.get(op, ())
        if not older and (i is None or v < 0 or v >= 2**31 - 1):
            if not (i in BENIGN.get(op, set())):
                bad_accepted.append(desc)
                continue
        wp = WasmPlan(WEB_RUNTIME["edgepack.wasm"], layout.encode(p))
        wp.run()
    assert not bad_accepted, f"corrupt {op.name} plans accepted: {bad_accepted}"


def test_hostile_shapes_rejected():
    """A conv whose declared output shape disagrees with its window, or weights of the wrong size."""
    m, _ = _conv_model((1, 4, 9, 9), (6, 4, 3, 3), pads=[1, 1, 1, 1])
    plan = _lowered(m).plan
    node = next(n for n in plan.nodes if n.op == int(Op.CONV))
    for tid, dim, val in [(node.outputs[0], 3, 10), (node.inputs[0], 2, 8), (node.inputs[1], 0, 1)]:
        p = copy.deepcopy(plan)
        t = p.tensors[tid]
        dims = list(t.dims)
        dims[dim] = val
        nb = int(np.prod(dims)) * 4
        p.tensors[tid] = dataclasses.replace(t, dims=tuple(dims), nbytes=nb)
        with pytest.raises(RuntimeFailure):
            _open(p)


def test_winograd_f4_refuses_hostile_params(tmp_path, monkeypatch):
    """Hostile parameter words / dims of WINOGRAD_FILTER and WINOGRAD_CONV_F4 nodes: refused or run cleanly
    under ASan + UBSan (host build) and without a wasm trap."""
    from .param_mutants import check_hostile_params
    _winograd_tile(monkeypatch, 4)
    m, _ = _conv_model((1, 16, 9, 11), (16, 16, 3, 3), pads=[1, 1, 1, 1], seed=3)
    plan = (package(m, target="web", out=tmp_path / "b", verify=False) / "model.plan").read_bytes()
    check_hostile_params([plan], tmp_path, seed=9, min_op=Op.WINOGRAD_CONV_F4)
