"""Issue 21: NaN propagates through ReduceMax/ReduceMin (and the other reductions), elementwise Max/Min, MaxPool,
GlobalMaxPool and ArgMax/ArgMin on every build: the SIMD, relaxed-SIMD and scalar wasm builds under wasmtime,
the threaded and threaded relaxed-SIMD builds in Node (2 workers), and the NEON aarch64 build under qemu.

The expected values are numpy's (any NaN in the set gives NaN; ArgMax/ArgMin return the first NaN, the last with
select_last_index): the ONNX reference evaluator's, except for MaxPool, whose reference loop keeps a NaN only in
some windows (`if v > acc`), so the expectation is np.max over each window. onnxruntime 1.31's CPU kernels agree
when the NaN is the first element a reduction visits (and, for GlobalMaxPool, when it is the last), and drop it
elsewhere (an order-dependent result of their SIMD max): the cases where it agrees are compared with
onnxruntime as well, so a change on either side shows."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from .lt_util import assert_same, one_node, ort_run, ours, ref_run

from .conftest import VARIANTS

RNG = np.random.default_rng(21)


def _x(shape: tuple[int, ...], nan_at: list[int]) -> np.ndarray:
    x = RNG.standard_normal(shape).astype(np.float32)
    for p in nan_at:
        x.flat[p] = np.nan
    return x


def maxpool_np(x: np.ndarray, kernel: list[int], strides: list[int], pads: list[int] | None = None) -> np.ndarray:
    """MaxPool (2-D, floor mode) as np.max over each window: NaN anywhere in a window gives NaN."""
    p = pads or [0, 0, 0, 0]
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])), constant_values=-np.inf)
    w = np.lib.stride_tricks.sliding_window_view(xp, kernel, axis=(2, 3))[:, :, ::strides[0], ::strides[1]]
    return np.max(w, axis=(4, 5)).astype(np.float32)


def _check(tmp: Path, m: onnx.ModelProto, feeds: dict[str, np.ndarray], ort_agrees: bool = False,
           want: list[np.ndarray] | None = None) -> list[np.ndarray]:
    want = want if want is not None else ref_run(m, feeds)
    if ort_agrees:
        for w, o in zip(want, ort_run(m, feeds)):
            assert_same(o, w, "onnxruntime vs the ONNX reference")
    for v, got in ours(m, feeds, tmp, VARIANTS).items():
        for g, w in zip(got, want):
            assert_same(g, w, f"{m.graph.node[0].op_type} [{v}]")
    return want


# NaN positions in a [2, 3, 4, 5] tensor: first, inside a vector body, in a scalar tail, last, two at once
POSITIONS = [[0], [9], [37], [119], [3, 64]]


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("nan_at", POSITIONS)
@pytest.mark.parametrize("axes", [None, [3], [1], [0, 2], [1, 2, 3]])
def test_reduce_max_min(tmp_path: Path, op: str, nan_at: list[int], axes) -> None:
    x = _x((2, 3, 4, 5), nan_at)
    ins = {"x": x} if axes is None else {"x": x, "axes": np.array(axes, np.int64)}
    m = one_node(op, ins, ["y"], consts=() if axes is None else ("axes",), opset=18, keepdims=0)
    want = _check(tmp_path, m, {"x": x}, ort_agrees=axes is None and nan_at == [0])
    assert np.isnan(want[0]).any()


@pytest.mark.parametrize("op", ["ReduceLogSumExp", "ReduceSum", "ReduceMean", "ReduceL2"])
def test_other_reductions(tmp_path: Path, op: str) -> None:
    x = _x((3, 17), [20])
    _check(tmp_path, one_node(op, {"x": x, "axes": np.array([1], np.int64)}, ["y"], consts=("axes",), opset=18), {"x": x})


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("nan_in", ["a", "b", "both"])
def test_elementwise_max_min(tmp_path: Path, op: str, nan_in: str) -> None:
    a, b = _x((3, 9), []), _x((3, 9), [])
    if nan_in in ("a", "both"):
        a.flat[[0, 5, 26]] = np.nan
    if nan_in in ("b", "both"):
        b.flat[[1, 5, 13]] = np.nan
    m = one_node(op, {"a": a, "b": b}, ["y"], opset=13)
    _check(tmp_path, m, {"a": a, "b": b}, ort_agrees=True)
    bs = b[:1, :1]   # a broadcast scalar operand (the kernel's splat path)
    m = one_node(op, {"a": a, "bs": bs}, ["y"], opset=13)
    _check(tmp_path / "bc", m, {"a": a, "bs": bs}, ort_agrees=True)


@pytest.mark.parametrize("nan_at", [[0], [5], [27], [12 * 13 - 2], [40, 41]])
@pytest.mark.parametrize("kw", [dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                                dict(kernel_shape=[2, 2], strides=[1, 1]), dict(kernel_shape=[3, 2], strides=[1, 2])])
def test_maxpool(tmp_path: Path, nan_at: list[int], kw: dict) -> None:
    x = _x((1, 2, 12, 13), nan_at)
    want = _check(tmp_path, one_node("MaxPool", {"x": x}, ["y"], opset=13, **kw), {"x": x},
                  want=[maxpool_np(x, kw["kernel_shape"], kw["strides"], kw.get("pads"))])
    assert np.isnan(want[0]).any()


@pytest.mark.parametrize("nan_at", [[0], [7], [30], [47]])
def test_global_maxpool(tmp_path: Path, nan_at: list[int]) -> None:
    x = _x((2, 2, 3, 4), nan_at)   # planes of 12: a vector body of 8 and a tail of 4
    _check(tmp_path, one_node("GlobalMaxPool", {"x": x}, ["y"], opset=13), {"x": x}, ort_agrees=nan_at == [47])


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("nan_at", [[0], [3], [2, 9], [11]])
@pytest.mark.parametrize("last", [0, 1])
def test_argmax_argmin(tmp_path: Path, op: str, nan_at: list[int], last: int) -> None:
    x = _x((12,), nan_at).reshape(1, 12)
    m = one_node(op, {"x": x}, ["y"], opset=13, axis=1, select_last_index=last)
    # onnxruntime: a NaN in the first position wins without select_last_index, as the reference; elsewhere it
    # depends on the layout (a 1-D input: the first NaN; along a row's inner axis: ignored)
    _check(tmp_path, m, {"x": x}, ort_agrees=last == 0 and nan_at[0] == 0)


def test_softmax(tmp_path: Path) -> None:
    """A NaN (or +inf: inf - inf) in a row makes the row NaN, the other rows exact: rows of 19 put a NaN in the
    8-wide exp body (ep_expf4_nonpos_body) and in the scalar tail."""
    x = _x((4, 19), [5, 19 + 17])
    x[2, 3] = np.inf
    want = _check(tmp_path, one_node("Softmax", {"x": x}, ["y"], opset=13, axis=-1), {"x": x}, ort_agrees=True)
    assert np.isnan(want[0][:3]).all() and not np.isnan(want[0][3]).any()


# ---- one bundle with every NaN-sensitive kernel: the NEON build under qemu, the threaded wasm builds in Node ---------

def _nan_model() -> tuple[onnx.ModelProto, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The model, its feeds and the expected outputs (the reference evaluator's; MaxPool's: np.max per window)."""
    from onnx import TensorProto, helper
    x4 = _x((2, 3, 4, 5), [37])
    xp = _x((1, 2, 12, 13), [27, 100])
    a, b = _x((3, 9), [4]), _x((3, 9), [13])
    nodes = [helper.make_node("ReduceMax", ["x4"], ["rmax"], keepdims=0),
             helper.make_node("ReduceMin", ["x4", "ax"], ["rmin"], keepdims=1),
             helper.make_node("MaxPool", ["xp"], ["mp"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalMaxPool", ["xp"], ["gmp"]),
             helper.make_node("Max", ["a", "b"], ["emax"]), helper.make_node("Min", ["a", "b"], ["emin"]),
             helper.make_node("ArgMax", ["a"], ["amax"], axis=1), helper.make_node("ArgMin", ["a"], ["amin"], axis=1,
                                                                                   select_last_index=1)]
    f = lambda n, v: helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape)   # noqa: E731
    g = helper.make_graph(nodes, "nan", [f("x4", x4), f("xp", xp), f("a", a), f("b", b)],
                          [helper.make_empty_tensor_value_info(o) for o in
                           ["rmax", "rmin", "mp", "gmp", "emax", "emin", "amax", "amin"]],
                          [onnx.numpy_helper.from_array(np.array([1, 3], np.int64), "ax")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    m = onnx.shape_inference.infer_shapes(m)
    feeds = {"x4": x4, "xp": xp, "a": a, "b": b}
    want = dict(zip([o.name for o in m.graph.output], ref_run(m, feeds)))
    want["mp"] = maxpool_np(xp, [3, 3], [2, 2], [1, 1, 1, 1])
    for k, w in want.items():
        assert k in ("amax", "amin") or np.isnan(w).any(), k
    return m, feeds, want


@pytest.mark.skipif(shutil.which("qemu-aarch64") is None or shutil.which("aarch64-linux-gnu-gcc") is None,
                    reason="qemu-user or gcc-aarch64-linux-gnu missing")
def test_nan_propagation_aarch64(tmp_path: Path) -> None:
    """One pi5 bundle holding every NaN-sensitive kernel, run by edgepack-run under qemu (NEON vector layer)."""
    import json

    from packager import package
    from packager.targets import edge as E
    m, feeds, want = _nan_model()
    bundle = package(m, target="pi5", out=tmp_path / "pi5", verify=False)
    outs = json.loads((bundle / "manifest.json").read_text())["outputs"]
    got = E.run_cli(bundle, feeds, outs, qemu=E.qemu_cmd("pi5"))
    for k, w in want.items():
        assert_same(np.asarray(got[k]), w, f"{k} [pi5 NEON under qemu]")


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node")
@pytest.mark.parametrize("isa", ["simd", "relaxed"])
def test_nan_propagation_threaded_builds(tmp_path: Path, isa: str) -> None:
    """The same bundle on edgepack-threads(-relaxed).wasm in Node with 2 workers: the builds wasmtime cannot run."""
    from packager import package
    from .test_web_node import RELAXED_FLAG, _node_major, _node_run, _outputs
    if _node_major() < 20:
        pytest.skip("needs Node >= 20")
    m, feeds, want = _nan_model()
    bundle = package(m, target="web", out=tmp_path / "web", verify=False)
    res = _node_run(tmp_path / "run", bundle, feeds, isa, options={"threads": 2},
                    node_flags=(RELAXED_FLAG,) if isa == "relaxed" else ())
    assert res.get("variant") == {"simd": "threads", "relaxed": "threads-relaxed"}[isa], res
    got = _outputs(res)
    for k, w in want.items():
        assert_same(np.asarray(got[k]), w, f"{k} [{res['variant']} build, 2 threads]")
