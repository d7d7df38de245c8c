"""The long tail of ops (packager/ops/index_ops.py, norm_rewrites.py, elementwise.py; kernels/axis_ops.c and
elementwise.c): small one-node models per op and attribute combination, packaged, run on the SIMD, relaxed and
scalar wasm builds under wasmtime, compared with onnxruntime (the ONNX reference evaluator where onnxruntime
does not implement the opset), plus the refusals: a clear error naming op, node and opset."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from packager.errors import PackagerError

from .lt_util import assert_same, feeds_of, one_node, ort_run, ours, ref_run

from .conftest import VARIANTS

RNG = np.random.default_rng(7)


def _data(shape: tuple[int, ...], dt, lo: int = -4, hi: int = 5) -> np.ndarray:
    """Small integers (ties on purpose) as dt; floats get a fraction too where lo/hi allow."""
    v = RNG.integers(lo, hi, size=shape)
    if np.dtype(dt) == np.uint8:
        v = np.abs(v)
    return v.astype(dt)


def run(tmp: Path, op: str, ins: dict, outs=("y",), consts=(), opset: int = 18, ref: str = "ort",
        sort_last_axis: bool = False, rtol: float = 1e-5, atol: float = 1e-6, want: list | None = None,
        **attrs) -> None:
    m = one_node(op, ins, outs, consts, opset, **attrs)
    feeds = feeds_of(ins, consts)
    if want is None and ref == "ort":
        try:
            want = ort_run(m, feeds)
        except Exception as e:  # noqa: BLE001 - onnxruntime lacks this op/dtype/opset: the ONNX reference instead
            if "NOT_IMPLEMENTED" not in str(e) and "not implemented" not in str(e).lower():
                raise
    if want is None:
        want = ref_run(m, feeds)
    for v, got in ours(m, feeds, tmp, VARIANTS).items():
        for o, g, w in zip(outs, got, want):
            if sort_last_axis:
                g, w = np.sort(g, axis=-1), np.sort(w, axis=-1)
            assert_same(g, w, f"{op} {attrs} output {o} [{v}]", rtol, atol)


DTYPES = [np.float32, np.int32, np.int64, np.int8, np.uint8]


# ---- ArgMax / ArgMin / Hardmax / TopK / CumSum (AXIS) --------------------------------------------------------

@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("axis,keepdims,last", [(0, 1, 0), (1, 0, 0), (-1, 1, 1), (2, 0, 1)])
def test_arg(tmp_path: Path, op: str, dt, axis: int, keepdims: int, last: int) -> None:
    run(tmp_path, op, {"x": _data((3, 4, 5), dt)}, opset=13, axis=axis, keepdims=keepdims, select_last_index=last)


@pytest.mark.parametrize("opset,axis", [(13, -1), (13, 0), (13, 1), (11, 1), (11, 0)])
def test_hardmax(tmp_path: Path, opset: int, axis: int) -> None:
    run(tmp_path, "Hardmax", {"x": _data((2, 3, 4), np.float32, -2, 3)}, opset=opset, axis=axis)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("axis,k,largest", [(-1, 3, 1), (0, 2, 0), (1, 4, 1), (1, 0, 1), (2, 5, 0)])
def test_topk(tmp_path: Path, dt, axis: int, k: int, largest: int) -> None:
    ins = {"x": _data((3, 4, 5), dt), "k": np.array([k], np.int64)}
    run(tmp_path, "TopK", ins, ("values", "indices"), consts=("k",), opset=11, axis=axis, largest=largest)


def test_topk_unsorted_and_opset1(tmp_path: Path) -> None:
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    run(tmp_path / "u", "TopK", {"x": x, "k": np.array([4], np.int64)}, ("values", "indices"), consts=("k",),
        opset=11, sorted=0, sort_last_axis=True)
    run(tmp_path / "o1", "TopK", {"x": x}, ("values", "indices"), opset=9, k=3)


@pytest.mark.parametrize("dt", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("axis,exclusive,reverse", [(0, 0, 0), (1, 1, 0), (-1, 0, 1), (1, 1, 1)])
def test_cumsum(tmp_path: Path, dt, axis: int, exclusive: int, reverse: int) -> None:
    ins = {"x": _data((3, 4, 5), dt) if dt != np.float32 else RNG.standard_normal((3, 4, 5)).astype(dt),
           "axis": np.array(axis, np.int64)}
    run(tmp_path, "CumSum", ins, consts=("axis",), opset=14, exclusive=exclusive, reverse=reverse)


# ---- Trilu / OneHot / Compress (rewrites) ---------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.float32, np.int64, np.uint8])
@pytest.mark.parametrize("upper,k", [(1, 0), (0, 0), (1, 2), (0, -1), (1, -7), (0, 9)])
def test_trilu(tmp_path: Path, dt, upper: int, k: int) -> None:
    run(tmp_path, "Trilu", {"x": _data((2, 4, 6), dt, 1, 9), "k": np.array(k, np.int64)}, consts=("k",), opset=14, upper=upper)


def test_trilu_default_k(tmp_path: Path) -> None:
    run(tmp_path, "Trilu", {"x": _data((5, 3), np.float32, 1, 9)}, opset=14, upper=0)


@pytest.mark.parametrize("idx_dt", [np.int64, np.int32, np.float32])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_onehot(tmp_path: Path, idx_dt, axis: int) -> None:
    ind = np.array([[0, 3, -1], [9, -4, 2]], idx_dt)   # 9 and -4... out of range for depth 4 at 9: all off
    ins = {"indices": ind, "depth": np.array(4, np.int64), "values": np.array([-2.0, 5.0], np.float32)}
    run(tmp_path, "OneHot", ins, consts=("depth", "values"), opset=11, axis=axis)


def test_onehot_runtime_values_int(tmp_path: Path) -> None:
    ins = {"indices": np.array([1, 0, 2, -3], np.int64), "depth": np.array(3, np.int64), "values": np.array([0, 7], np.int32)}
    run(tmp_path, "OneHot", ins, consts=("depth",), opset=11)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress(tmp_path: Path, axis) -> None:
    cond = np.array([True, False, True], np.bool_)
    kw = {} if axis is None else {"axis": axis}
    run(tmp_path, "Compress", {"x": _data((3, 3), np.float32), "cond": cond}, consts=("cond",), opset=11, **kw)


# ---- GatherND / ScatterElements / ScatterND -------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.float32, np.int64, np.bool_])
@pytest.mark.parametrize("dshape,ind,b", [
    ((3, 4), [[0, 1], [2, 3], [-1, 0]], 0),
    ((3, 4, 2), [[1], [0], [-1]], 0),
    ((2, 3, 4), [[[0, 1]], [[2, 3]]], 1),
    ((2, 3, 4), [[1], [2]], 1),
])
def test_gather_nd(tmp_path: Path, dt, dshape, ind, b: int) -> None:
    data = _data(dshape, np.float32, 0, 2).astype(dt) if dt == np.bool_ else _data(dshape, dt)
    run(tmp_path, "GatherND", {"data": data, "indices": np.array(ind, np.int64)}, opset=13, batch_dims=b)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1])
def test_scatter_elements(tmp_path: Path, dt, reduction: str, axis: int) -> None:
    data = _data((3, 4), dt)
    ind = np.array([[1, -1, 0], [2, 0, 2]], np.int64) if axis == 1 else np.array([[1, 0, 2, -1], [0, 2, 1, 0]], np.int64)
    if reduction == "none":   # duplicates are ordered differently by onnxruntime; keep them unique along the axis
        ind = np.array([[1, -1, 0], [2, 0, 1]], np.int64) if axis == 1 else np.array([[1, 0, 2, -1], [0, 2, 1, 0]], np.int64)
    upd = _data(ind.shape, dt)
    run(tmp_path, "ScatterElements", {"data": data, "indices": ind, "updates": upd}, axis=axis, reduction=reduction)


def test_scatter_opset9_int32_indices(tmp_path: Path) -> None:
    ins = {"data": np.zeros((3, 3), np.float32), "indices": np.array([[1, 0, 2], [0, 2, 1]], np.int32),
           "updates": RNG.standard_normal((2, 3)).astype(np.float32)}
    run(tmp_path, "Scatter", ins, opset=9, axis=0)


@pytest.mark.parametrize("dt", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd(tmp_path: Path, dt, reduction: str) -> None:
    data = _data((4, 3, 2), dt)
    ind = np.array([[0], [2], [-1]] if reduction == "none" else [[0], [2], [0]], np.int64)
    run(tmp_path / "slices", "ScatterND", {"data": data, "indices": ind, "updates": _data((3, 3, 2), dt)}, reduction=reduction)
    ind2 = np.array([[0, 1, 1], [3, 2, 0], [1, 0, 1]], np.int64)
    run(tmp_path / "elems", "ScatterND", {"data": data, "indices": ind2, "updates": _data((3,), dt)}, reduction=reduction)


# ---- elementwise: Mod, BitShift, IsNaN, IsInf, trigonometric ------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod(tmp_path: Path, dt, fmod: int) -> None:
    if dt == np.float32 and fmod == 0:   # the spec wants fmod=1 for floats; the reference computes numpy's mod
        x = np.array([-4.5, 7.25, 5.0, -0.5, 3e7, np.inf, 2.0, -6.0], np.float32)
        y = np.array([2.0, -3.0, 2.5, 0.25, 7.0, 2.0, np.inf, np.inf], np.float32)
        run(tmp_path, "Mod", {"x": x, "y": y}, ("z",), opset=13, ref="ref", fmod=0)
        return
    x = _data((3, 5), dt, -30, 30) if dt != np.float32 else (RNG.standard_normal((3, 5)) * 20).astype(dt)
    y = _data((5,), dt, -7, 8)
    y[y == 0] = 3
    run(tmp_path, "Mod", {"x": x, "y": y}, ("z",), opset=13, fmod=fmod)


def test_mod_float_exact(tmp_path: Path) -> None:
    x = np.array([1e30, -1e30, 123456.789, 1e-30, -7.5, 0.0], np.float32)
    y = np.array([3.3, 7.1, 0.1, 3.0, 0.75, 5.0], np.float32)
    run(tmp_path, "Mod", {"x": x, "y": y}, ("z",), opset=13, fmod=1, rtol=0, atol=0)


def test_bitshift_uint8(tmp_path: Path) -> None:
    x = np.array([1, 2, 255, 128, 7], np.uint8)
    y = np.array([1, 7, 3, 1, 0], np.uint8)
    for d in ("LEFT", "RIGHT"):
        run(tmp_path / d, "BitShift", {"x": x, "y": y}, ("z",), opset=11, direction=d)


@pytest.mark.parametrize("dt", [np.int8, np.int32, np.int64])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift_signed_opset28(tmp_path: Path, dt, direction: str) -> None:
    x = np.array([-7, 5, 100, -128 if dt == np.int8 else -2**30, 3, -1], dt)
    y = np.array([1, -2, 3, 1, 200 if dt != np.int8 else 100, 70 if dt != np.int8 else 8], dt)
    run(tmp_path, "BitShift", {"x": x, "y": y}, ("z",), opset=28, ref="ref", direction=direction)


def test_isnan_isinf(tmp_path: Path) -> None:
    x = np.array([1.0, np.nan, np.inf, -np.inf, -0.0, 3e38], np.float32)
    run(tmp_path / "nan", "IsNaN", {"x": x}, opset=20)
    for pos, neg in [(1, 1), (1, 0), (0, 1), (0, 0)]:
        run(tmp_path / f"inf{pos}{neg}", "IsInf", {"x": x}, opset=20, detect_positive=pos, detect_negative=neg)


@pytest.mark.parametrize("op,lo,hi", [("Tan", -10, 10), ("Asin", -1, 1), ("Acos", -1, 1), ("Atan", -50, 50),
                                      ("Sinh", -10, 10), ("Cosh", -10, 10), ("Asinh", -100, 100), ("Acosh", 1, 100),
                                      ("Atanh", -0.999, 0.999)])
def test_trig(tmp_path: Path, op: str, lo: float, hi: float) -> None:
    x = RNG.uniform(lo, hi, size=(64,)).astype(np.float32)
    x[:6] = [lo, hi, 0.0 if lo < 0 else lo, 1e-5 if lo < 0 else lo, np.nan, -np.inf if op in ("Atan", "Sinh", "Asinh") else lo]
    run(tmp_path, op, {"x": x}, opset=9, rtol=2e-6, atol=1e-7)


# ---- InstanceNormalization / GroupNormalization / LRN ---------------------------------------------------------

def test_instance_norm(tmp_path: Path) -> None:
    ins = {"x": RNG.standard_normal((2, 3, 4, 5)).astype(np.float32), "s": RNG.standard_normal(3).astype(np.float32),
           "b": RNG.standard_normal(3).astype(np.float32)}
    run(tmp_path / "c", "InstanceNormalization", ins, consts=("s", "b"), epsilon=1e-3, rtol=1e-4, atol=1e-5)
    run(tmp_path / "r", "InstanceNormalization", ins, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset,groups", [(21, 2), (21, 4), (21, 1)])
def test_group_norm(tmp_path: Path, opset: int, groups: int) -> None:
    c = 4
    nsc = c
    ins = {"x": RNG.standard_normal((2, c, 3, 5)).astype(np.float32), "s": RNG.standard_normal(nsc).astype(np.float32),
           "b": RNG.standard_normal(nsc).astype(np.float32)}
    run(tmp_path, "GroupNormalization", ins, consts=("s", "b"), opset=opset, ref="ref", num_groups=groups,
        epsilon=1e-4, rtol=1e-4, atol=1e-5)


def _lrn_spec(x: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    """The spec's LRN: channels [c - floor((size-1)/2), c + ceil((size-1)/2)] (the reference evaluator's loop
    walks the batch dim instead, and onnxruntime takes odd sizes only)."""
    c = x.shape[1]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    sq = np.stack([np.sum(x[:, max(0, k - lo):min(c, k + hi + 1)].astype(np.float64) ** 2, axis=1) for k in range(c)], 1)
    return (x / (bias + alpha / size * sq) ** beta).astype(np.float32)


@pytest.mark.parametrize("size,beta", [(1, 0.6), (2, 0.6), (3, 0.6), (4, 0.6), (5, 0.6), (5, 0.75), (4, 0.75)])
def test_lrn(tmp_path: Path, size: int, beta: float) -> None:
    """beta 0.75 (Caffe's, AlexNet/GoogLeNet) takes square roots instead of POW: the same answer."""
    x = RNG.standard_normal((2, 6, 3, 4)).astype(np.float32)
    kw = dict(alpha=0.3, beta=beta, bias=1.5)
    run(tmp_path, "LRN", {"x": x}, opset=13, size=size, rtol=1e-4, atol=1e-5,
        want=None if size % 2 else [_lrn_spec(x, size, **kw)], **kw)


# ---- refusals: an error naming op, node and opset --------------------------------------------------------

@pytest.mark.parametrize("op,ins,consts,opset,attrs,msg", [
    ("TopK", {"x": np.zeros((2, 3), np.float32), "k": np.array([5], np.int64)}, ("k",), 11, {}, "exceeds the axis extent"),
    ("BitShift", {"x": np.zeros(3, np.float32), "y": np.zeros(3, np.float32)}, (), 11, {"direction": "LEFT"}, "not supported"),
    ("CumSum", {"x": np.zeros((2, 3), np.float32), "axis": np.array(3, np.int64)}, ("axis",), 14, {}, "out of range"),
    ("ScatterElements", {"data": np.zeros((2, 3), np.bool_), "indices": np.zeros((1, 3), np.int64),
                         "updates": np.zeros((1, 3), np.bool_)}, (), 18, {"reduction": "add"}, "not supported"),
    ("GatherND", {"data": np.zeros((2, 3), np.float32), "indices": np.array([[5, 0]], np.int64)}, ("indices",), 13, {},
     "out of range"),
])
def test_refused_with_a_clear_error(tmp_path: Path, op, ins, consts, opset, attrs, msg) -> None:
    from packager import package
    outs = ("v", "i") if op == "TopK" else ("z",)
    try:
        m = one_node(op, ins, outs, consts, opset, **attrs)
    except Exception:   # noqa: BLE001 - shape inference itself refuses some: build it without
        pytest.skip("ONNX shape inference refuses this model")
    with pytest.raises(PackagerError) as e:
        package(m, out=tmp_path / "b", verify=False)
    s = str(e.value)
    assert msg in s and op in s and f"opset {opset}" in s, s


# ---- Einsum (REDUCE / TRANSPOSE / MATMUL) ---------------------------------------------------------------------

@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("i,i", [(7,), (7,)]),
    ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]), ("ijk->ki", [(2, 3, 4)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]), ("ij,kj->ik", [(3, 4), (5, 4)]), ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
    ("i,j->ij", [(3,), (4,)]), ("ij,ij->i", [(3, 4), (3, 4)]), ("bij,jk", [(2, 3, 4), (4, 5)]), ("ijk,k->", [(2, 3, 4), (4,)]),
    # a label repeated within an operand: diagonal, trace, batched, non-adjacent, three times, with a product
    ("ii->i", [(3, 3)]), ("ii", [(4, 4)]), ("bii->bi", [(2, 3, 3)]), ("iji->ji", [(3, 2, 3)]), ("iii->i", [(3, 3, 3)]),
    ("ii,ij->j", [(3, 3), (3, 5)]), ("bjj,bjk->bk", [(2, 4, 4), (2, 4, 3)]),
])
def test_einsum(tmp_path: Path, eq: str, shapes) -> None:
    ins = {f"x{i}": RNG.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    run(tmp_path, "Einsum", ins, opset=12, equation=eq, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("eq,shapes,msg", [("i->ii", [(3,)], "repeated in the output"),
                                           ("ij,jk->ik", [(3, 1), (4, 5)], "extents"),
                                           ("i,i,i->i", [(3,), (3,), (3,)], "operands")])
def test_einsum_refused(tmp_path: Path, eq: str, shapes, msg: str) -> None:
    from packager import package
    ins = {f"x{i}": np.zeros(s, np.float32) for i, s in enumerate(shapes)}
    try:
        m = one_node("Einsum", ins, ["y"], (), 12, equation=eq)
    except Exception:   # noqa: BLE001
        pytest.skip("ONNX shape inference refuses this model")
    with pytest.raises(PackagerError, match=msg) as e:
        package(m, out=tmp_path / "b", verify=False)
    assert "Einsum" in str(e.value) and "opset 12" in str(e.value)


# ---- hostile plans, shape functions, the aarch64 build ---------------------------------------------------------

def _plans(tmp: Path) -> list[tuple[bytes, dict, list]]:
    """Bundled plans holding AXIS (every mode), SCATTER (both modes) and GATHER_ND nodes, with feeds and the
    onnxruntime outputs."""
    from packager import package
    cases = [
        ("ArgMax", {"x": _data((3, 4, 5), np.float32)}, (), 13, ("y",), dict(axis=1, keepdims=0)),
        ("TopK", {"x": _data((3, 6), np.int32), "k": np.array([3], np.int64)}, ("k",), 11, ("v", "i"), dict(largest=0)),
        ("CumSum", {"x": _data((3, 4), np.int64), "a": np.array(1, np.int64)}, ("a",), 14, ("y",), dict(reverse=1)),
        ("Hardmax", {"x": _data((2, 5), np.float32)}, (), 13, ("y",), {}),
        # constant indices: the hostile-plan driver feeds its own input bytes, which need not be valid indices
        ("ScatterElements", {"d": _data((3, 4), np.float32), "i": np.array([[1, 0], [2, -1]], np.int64),
                             "u": _data((2, 2), np.float32)}, ("i",), 18, ("y",), dict(axis=1, reduction="max")),
        ("ScatterND", {"d": _data((4, 3), np.float32), "i": np.array([[1], [3]], np.int64), "u": _data((2, 3), np.float32)},
         ("i",), 18, ("y",), dict(reduction="add")),
        ("GatherND", {"d": _data((2, 3, 4), np.uint8), "i": np.array([[1, 2], [0, -1]], np.int64)}, ("i",), 13, ("y",), {}),
    ]
    out = []
    for j, (op, ins, consts, opset, outs, attrs) in enumerate(cases):
        m = one_node(op, ins, outs, consts, opset, **attrs)
        feeds = feeds_of(ins, consts)
        b = package(m, target="web", out=tmp / f"p{j}", verify=False, input_shapes={k: v.shape for k, v in feeds.items()})
        out.append(((b / "model.plan").read_bytes(), feeds, m))
    return out


def test_hostile_params_refused_or_clean(tmp_path: Path) -> None:
    """Mutated parameter words and dims of AXIS / SCATTER / GATHER_ND nodes: refused at open or run cleanly under
    ASan + UBSan, never a wasm trap."""
    from packager.plan.opcodes import Op

    from .param_mutants import check_hostile_params
    plans = [p for p, _, _ in _plans(tmp_path)]
    check_hostile_params(plans, tmp_path, seed=52, n=40, wasm_n=6, min_op=Op.AXIS)


def test_shape_functions_agree(tmp_path: Path) -> None:
    """The shape functions of AXIS, SCATTER and GATHER_ND give every packaged plan's dims."""
    from .test_shape_fns import ShapeChecker
    sc = ShapeChecker()
    for plan, _, m in _plans(tmp_path):
        status, node, what, checked = sc.check(plan)
        assert status == 0 and checked >= 1, (m.graph.node[0].op_type, status, node, what)


@pytest.mark.skipif(__import__("shutil").which("qemu-aarch64") is None, reason="qemu-user missing")
def test_longtail_aarch64(tmp_path: Path) -> None:
    """The same plans on the pi5 target: edgepack-run (NEON build) under qemu against onnxruntime."""
    import json

    from packager import package
    from packager.targets import edge as E
    for j, (_, feeds, m) in enumerate(_plans(tmp_path / "web")):
        want = ort_run(m, feeds)
        b = package(m, target="pi5", out=tmp_path / f"pi5_{j}", verify=False,
                    input_shapes={k: v.shape for k, v in feeds.items()})
        outs = json.loads((b / "manifest.json").read_text())["outputs"]
        got = E.run_cli(b, feeds, outs, qemu=E.qemu_cmd("pi5"))
        for o, w in zip(m.graph.output, want):
            assert_same(np.asarray(got[o.name]), w, f"{m.graph.node[0].op_type} {o.name} [pi5 NEON under qemu]")


# ---- float16 through float32, bool ReduceMax/Min, ReverseSequence ----------------------------------------------

def test_float16_via_float32(tmp_path: Path) -> None:
    x = np.array([1.5, np.nan, np.inf, -np.inf, -7.25, 3.0], np.float16)
    y = np.array([2.0, 1.0, 3.0, 1.5, 2.5, -4.0], np.float16)
    run(tmp_path / "nan", "IsNaN", {"x": x}, opset=20)
    run(tmp_path / "inf", "IsInf", {"x": x}, opset=20, detect_negative=0)
    xf, yf = np.array([-4.5, 7.25, 5.0, -0.5, 100.0], np.float16), np.array([2.0, -3.0, 2.5, 0.25, 7.0], np.float16)
    run(tmp_path / "fmod", "Mod", {"x": xf, "y": yf}, ("z",), opset=13, fmod=1)
    run(tmp_path / "max", "Max", {"x": x, "y": y}, ("z",), opset=13)
    run(tmp_path / "min", "Min", {"x": x, "y": y}, ("z",), opset=13)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_bool(tmp_path: Path, op: str) -> None:
    x = np.array([[True, False, True], [True, True, True], [False, False, False]])
    run(tmp_path, op, {"x": x, "axes": np.array([1], np.int64)}, consts=("axes",), opset=20, keepdims=0)


@pytest.mark.parametrize("batch_axis,time_axis", [(1, 0), (0, 1)])
def test_reverse_sequence(tmp_path: Path, batch_axis: int, time_axis: int) -> None:
    shape = (4, 3, 2) if time_axis == 0 else (3, 4, 2)
    ins = {"x": _data(shape, np.float32), "lens": np.array([4, 1, 3], np.int64)}
    run(tmp_path, "ReverseSequence", ins, consts=("lens",), opset=10, batch_axis=batch_axis, time_axis=time_axis)


@pytest.mark.parametrize("op", ["Round", "Sign"])
def test_round_sign_edges(tmp_path: Path, op: str) -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.0, 0.0, np.nan, np.inf, -np.inf, 8388609.0, 1e-30],
                 np.float32)
    run(tmp_path, op, {"x": x}, opset=13, rtol=0, atol=0)


def test_runtime_shapes_and_k(tmp_path: Path) -> None:
    """A dynamic (version-2) plan: TopK's k = n // 2 computed from the input's shape at run time (the core runs the
    shape arithmetic and the AXIS shape function reads K), ArgMax and CumSum over a run-time extent."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    from packager import load_bundle, package
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Slice", ["s", "one", "two"], ["k"]),
             h.make_node("Div", ["k", "two"], ["k2"]), h.make_node("TopK", ["x", "k2"], ["v", "i"], axis=1),
             h.make_node("ArgMax", ["x"], ["am"], axis=1), h.make_node("CumSum", ["x", "ax"], ["cs"])]
    g = h.make_graph(nodes, "dyn", [h.make_tensor_value_info("x", T.FLOAT, [2, "n"])],
                     [h.make_tensor_value_info("v", T.FLOAT, [2, None]), h.make_tensor_value_info("i", T.INT64, [2, None]),
                      h.make_tensor_value_info("am", T.INT64, [2, 1]), h.make_tensor_value_info("cs", T.FLOAT, [2, "n"])],
                     [nh.from_array(np.array([1], np.int64), "one"), nh.from_array(np.array([2], np.int64), "two"),
                      nh.from_array(np.array(1, np.int64), "ax")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    out = package(m, target="web", out=tmp_path / "b", dynamic=True, verify=False)
    for n in (6, 11, 3):
        x = RNG.standard_normal((2, n)).astype(np.float32)
        want = ort_run(m, {"x": x})
        for v in ("simd", "scalar"):
            got = load_bundle(out, v).run({"x": x})
            for name, w in zip(["v", "i", "am", "cs"], want):
                assert_same(got[name], w, f"{name} n={n} [{v}]")
    onnx.checker.check_model(m)
