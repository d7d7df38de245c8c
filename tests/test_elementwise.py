"""Elementwise family (UNARY, BINARY, WHERE, CAST): hostile plans are refused at load, and random
shapes/broadcasts match onnxruntime through package -> bundle -> wasmtime (SIMD and scalar builds)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from packager import load_bundle, package
from packager.errors import PackagerError, RuntimeFailure
from packager.plan import layout
from packager.plan.opcodes import Op
from packager.runtime.wasm import WasmPlan

NP2ONNX = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64, np.int32: TensorProto.INT32,
           np.bool_: TensorProto.BOOL, np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def _model(op: str, ins: list[tuple[str, type, tuple]], out: tuple[str, type, tuple], opset: int = 17,
           inits: dict[str, np.ndarray] | None = None, **attrs) -> onnx.ModelProto:
    inits = inits or {}
    node = helper.make_node(op, [n for n, _, _ in ins], [out[0]], **attrs)
    g = helper.make_graph(
        [node], "t",
        [helper.make_tensor_value_info(n, NP2ONNX[t], s) for n, t, s in ins if n not in inits],
        [helper.make_tensor_value_info(out[0], NP2ONNX[out[1]], out[2])],
        [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    import onnxruntime as ort
    model.ir_version = min(model.ir_version, 10)
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _run(model: onnx.ModelProto, feeds: dict, tmp: Path, variant: str = "simd") -> np.ndarray:
    out = package(model, out=tmp / f"b{variant}", verify=False)
    return list(load_bundle(out, variant).run(feeds).values())[0]


def _rand(shape, dtype, rng) -> np.ndarray:
    if dtype == np.float32:
        return np.asarray(rng.standard_normal(shape) * 3, np.float32)
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    return np.asarray(rng.integers(-50, 50, shape), dtype)


BCASTS = [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), ()), ((), (3, 1)), ((1, 3, 1, 1), (2, 3, 4, 5)),
          ((2, 3, 4, 5), (5,)), ((2, 1, 4, 1), (1, 3, 1, 5)), ((3, 1), (1, 7)), ((4, 1, 6), (4, 5, 1)),
          ((2, 3, 1, 5), (3, 4, 1)), ((7,), (1,)), ((1, 1, 9), (2, 1, 9))]


@pytest.mark.parametrize("variant", ["simd", "scalar"])
def test_binary_broadcast_vs_ort(tmp_path: Path, variant: str) -> None:
    rng = np.random.default_rng(0)
    k = 0
    for op, dt in [("Add", np.float32), ("Sub", np.float32), ("Mul", np.float32), ("Div", np.float32),
                   ("Max", np.float32), ("Min", np.float32), ("Add", np.int64), ("Mul", np.int64),
                   ("Div", np.int64), ("Less", np.float32), ("Equal", np.int64), ("Pow", np.float32),
                   ("PRelu", np.float32)]:
        for sa, sb in BCASTS:
            if op == "PRelu" and np.broadcast_shapes(sa, sb) != sa:
                continue
            a, b = _rand(sa, dt, rng), _rand(sb, dt, rng)
            if op == "Div" and dt == np.int64:
                b[b == 0] = 7
            if op == "Pow":
                a = np.asarray(np.abs(a))
            odt = np.bool_ if op in ("Less", "Equal") else dt
            so = tuple(np.broadcast_shapes(sa, sb))
            m = _model(op, [("a", dt, sa), ("b", dt, sb)], ("y", odt, so), opset=16)
            want = _ort(m, {"a": a, "b": b})[0]
            k += 1
            got = _run(m, {"a": a, "b": b}, tmp_path / str(k), variant)
            assert got.shape == want.shape, (op, sa, sb)
            if odt == np.float32:
                np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, err_msg=f"{op} {sa} {sb}")
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{op} {sa} {sb}")


def test_unary_vs_ort(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    x = np.concatenate([(rng.standard_normal(1000) * 6), np.linspace(-12, 12, 97),
                        [0.0, -0.0, 1e-30, -1e-30, 90.0, -90.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    cases = [("Relu", {}), ("LeakyRelu", {"alpha": 0.3}), ("Sigmoid", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
             ("HardSwish", {}), ("Tanh", {}), ("Erf", {}), ("Exp", {}), ("Log", {}), ("Sqrt", {}),
             ("Reciprocal", {}), ("Neg", {}), ("Abs", {}), ("Floor", {}), ("Ceil", {}), ("Round", {}),
             ("Sign", {}), ("Elu", {"alpha": 0.7}), ("Selu", {}), ("Celu", {"alpha": 1.5}), ("Softplus", {}),
             ("Softsign", {}), ("Mish", {}), ("ThresholdedRelu", {"alpha": 0.5}), ("Sin", {}), ("Cos", {})]
    for k, (op, attrs) in enumerate(cases):
        opset = 18 if op == "Mish" else 14 if op == "HardSwish" else 13
        m = _model(op, [("x", np.float32, x.shape)], ("y", np.float32, x.shape), opset=opset, **attrs)
        want = _ort(m, {"x": x})[0]
        got = _run(m, {"x": x}, tmp_path / str(k))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=op)


@pytest.mark.parametrize("to", [np.float32, np.int64, np.int32, np.int8, np.uint8, np.bool_])
@pytest.mark.parametrize("src", [np.float32, np.int64, np.int32, np.bool_, np.uint8])
def test_cast_vs_numpy(tmp_path: Path, src: type, to: type) -> None:
    rng = np.random.default_rng(2)
    x = _rand((3, 17), src, rng)
    if src == np.float32:
        x = np.round(x * 10, 2).astype(np.float32)   # in range of every integer target: defined
        x[0, :3] = [0.0, -0.0, 0.5]
    m = _model("Cast", [("x", src, x.shape)], ("y", to, x.shape), opset=13, to=NP2ONNX[to])
    got = _run(m, {"x": x}, tmp_path)
    want = _ort(m, {"x": x})[0]
    np.testing.assert_array_equal(got, want)


def test_where_variadic_and_pow_paths(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    c = rng.random((3, 1, 5)) < 0.5
    for k, dt in enumerate([np.float32, np.int64]):
        x, y = _rand((4, 1), dt, rng), _rand((1, 4, 5), dt, rng)
        m = _model("Where", [("c", np.bool_, c.shape), ("x", dt, x.shape), ("y", dt, y.shape)],
                   ("z", dt, (3, 4, 5)), opset=16)
        np.testing.assert_array_equal(_run(m, {"c": c, "x": x, "y": y}, tmp_path / f"w{k}"), np.where(c, x, y))
    ins = [_rand(s, np.float32, rng) for s in [(2, 3), (3,), (1, 3), (2, 1)]]
    for k, op in enumerate(["Sum", "Mean", "Max", "Min"]):
        m = _model(op, [(f"i{j}", np.float32, a.shape) for j, a in enumerate(ins)], ("o", np.float32, (2, 3)), opset=13)
        feeds = {f"i{j}": a for j, a in enumerate(ins)}
        np.testing.assert_allclose(_run(m, feeds, tmp_path / f"v{k}"), _ort(m, feeds)[0], rtol=1e-6)
    x = _rand((5, 7), np.float32, rng)
    x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    for k, e in enumerate([0.0, 1.0, 2.0, 3.0, 4.0, -1.0, 0.5, -2.5, 7.0]):
        m = _model("Pow", [("x", np.float32, x.shape), ("e", np.float32, ())], ("y", np.float32, x.shape),
                   opset=15, inits={"e": np.array(e, np.float32)})
        want = _ort(m, {"x": x})[0]   # C99 pow special cases (pow(-inf, 0.5) = inf), as onnxruntime
        np.testing.assert_allclose(_run(m, {"x": x}, tmp_path / f"p{k}"), want, rtol=2e-6, equal_nan=True)


def test_nan_propagation(tmp_path: Path) -> None:
    a = np.array([np.nan, 1.0, np.nan, -1.0, 2.0], np.float32)
    b = np.array([1.0, np.nan, np.nan, 0.0, 3.0], np.float32)
    for k, op in enumerate(["Max", "Min"]):
        m = _model(op, [("a", np.float32, a.shape), ("b", np.float32, b.shape)], ("y", np.float32, a.shape), opset=13)
        want = np.maximum(a, b) if op == "Max" else np.minimum(a, b)
        np.testing.assert_array_equal(_run(m, {"a": a, "b": b}, tmp_path / str(k)), want)
    m = _model("Clip", [("x", np.float32, a.shape), ("lo", np.float32, ()), ("hi", np.float32, ())],
               ("y", np.float32, a.shape), opset=13, inits={"lo": np.array(0.5, np.float32), "hi": np.array(1.5, np.float32)})
    np.testing.assert_array_equal(_run(m, {"x": a}, tmp_path / "c"), np.clip(a, 0.5, 1.5))


def test_rejections(tmp_path: Path) -> None:
    m = _model("Gelu", [("x", np.float32, (3,))], ("y", np.float32, (3,)), opset=20, approximate="erfish")
    with pytest.raises(PackagerError, match="approximate"):
        package(m, out=tmp_path / "g", verify=False)
    m = _model("Cast", [("x", np.float32, (3,))], ("y", np.float32, (3,)), opset=21, to=TensorProto.FLOAT6E2M3)
    m.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT6E2M3   # bfloat16 and float8 are plan dtypes now
    with pytest.raises(PackagerError, match="FLOAT6E2M3"):
        package(m, out=tmp_path / "c", verify=False)


# ---- hostile plans ------------------------------------------------------------------------------

def _plan_of(tmp: Path, model: onnx.ModelProto) -> tuple[layout.Plan, Path]:
    out = package(model, out=tmp, verify=False)
    return layout.decode((out / "model.plan").read_bytes()), out / "edgepack.wasm"


def _refused(wasm: Path, plan: layout.Plan) -> bool:
    try:
        WasmPlan(wasm, layout.encode(plan))
    except RuntimeFailure:
        return True
    return False


def test_hostile_binary_plans_refused(tmp_path: Path) -> None:
    m = _model("Add", [("a", np.float32, (2, 3, 4)), ("b", np.float32, (3, 1))], ("y", np.float32, (2, 3, 4)))
    plan, wasm = _plan_of(tmp_path, m)
    assert not _refused(wasm, plan)
    (i,) = [k for k, n in enumerate(plan.nodes) if n.op == Op.BINARY]
    node = plan.nodes[i]

    def with_node(**kw) -> layout.Plan:
        p = dataclasses.replace(plan, nodes=list(plan.nodes), tensors=list(plan.tensors))
        p.nodes[i] = dataclasses.replace(node, **kw)
        return p

    assert _refused(wasm, with_node(params=[99]))            # unknown function
    assert _refused(wasm, with_node(params=[-1]))
    assert _refused(wasm, with_node(params=[0, 0]))          # extra word
    assert _refused(wasm, with_node(params=[]))
    assert _refused(wasm, with_node(params=[8]))             # comparison needs a bool output
    # b's shape made incompatible with the output (3,1) -> (4,1): would read out of bounds
    b_id = node.inputs[1]
    p = with_node()
    p.tensors[b_id] = dataclasses.replace(p.tensors[b_id], dims=(4, 1), nbytes=16)
    assert _refused(wasm, p)
    # output larger than the broadcast
    y_id = node.outputs[0]
    p = with_node()
    p.tensors[y_id] = dataclasses.replace(p.tensors[y_id], dims=(2, 3, 8), nbytes=2 * 3 * 8 * 4)
    assert _refused(wasm, p)


def test_hostile_unary_plans_refused(tmp_path: Path) -> None:
    m = _model("LeakyRelu", [("x", np.float32, (4, 5))], ("y", np.float32, (4, 5)), alpha=0.2)
    plan, wasm = _plan_of(tmp_path, m)
    assert not _refused(wasm, plan)
    (i,) = [k for k, n in enumerate(plan.nodes) if n.op == Op.UNARY]
    node = plan.nodes[i]
    for params in ([], [2], [2, 0, 0], [1000, 0], [-5], [31]):   # 31 = NOT needs bool tensors
        p = dataclasses.replace(plan, nodes=list(plan.nodes))
        p.nodes[i] = dataclasses.replace(node, params=params)
        assert _refused(wasm, p), params
    p = dataclasses.replace(plan, nodes=list(plan.nodes), tensors=list(plan.tensors))
    y_id = node.outputs[0]
    p.tensors[y_id] = dataclasses.replace(p.tensors[y_id], dims=(5, 5), nbytes=100)
    assert _refused(wasm, p)


@pytest.mark.parametrize("variant", ["simd", "relaxed", "scalar"])
def test_gelu_edges(tmp_path: Path, variant: str) -> None:
    """GELU (erf form) over its whole range: erf's exp(-a^2) runs on a bounded argument (ep_math_vec.h,
    ep_expf4_neg16), so |x| large, the |x/sqrt2| = 1 and 4 switch points, tiny, NaN and +-inf must come out as
    onnxruntime's and a float64 reference within ONNX's backend-test tolerance (1 + erf is computed in f32, as
    onnxruntime does, so where it is tiny the relative error is large for both)."""
    import math
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(997) * 4, np.linspace(-10, 10, 401),
                        np.sqrt(2) * np.array([1.0, 4.0, -1.0, -4.0]), np.nextafter(np.float32(np.sqrt(2)), np.float32(0)) * np.array([1.0, -1.0]),
                        [0.0, -0.0, 1e-30, -1e-30, 1e-5, -1e-5, 5.5, -5.5, 5.7, -5.7, 6.0, -6.0, 30.0, -30.0,
                         1e30, -1e30, 3e38, -3e38, np.inf, -np.inf, np.nan]]).astype(np.float32)
    m = _model("Gelu", [("x", np.float32, x.shape)], ("y", np.float32, x.shape), opset=20)
    got = _run(m, {"x": x}, tmp_path, variant)
    want = _ort(m, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-7, equal_nan=True)
    ref = np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) if np.isfinite(v) else np.nan for v in x.astype(np.float64)])
    fin = np.isfinite(x)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-3, atol=1e-7)
    if variant != "scalar":   # the SIMD builds' GELU goes through erfc (ep_gelu4_k): no cancellation for x < 0
        np.testing.assert_allclose(got[fin], ref[fin], rtol=2e-5, atol=1e-30)
    assert np.isnan(got[np.isnan(x)]).all()
    assert got[x == np.inf][0] == np.inf


@pytest.mark.parametrize("variant", ["simd", "relaxed", "scalar"])
def test_sigmoid_edges(tmp_path: Path, variant: str) -> None:
    """Sigmoid over its whole range against a float64 reference: the SIMD builds' exp(-|x|) (ep_math_vec.h,
    ep_sigmoidf4_body) clamps -|x| at -88 and scales by 2^n once, so around -87.68 / -88 its results go from
    subnormal to 0 (within 2^-126 of the reference, the scalar build's keep the subnormals); +-inf give the limits
    exactly, NaN stays NaN, and elsewhere the relative error is at most that of its degree-4 exp (2.7e-6)."""
    x = np.concatenate([np.linspace(-20, 20, 801), np.linspace(-90, -80, 201), [-87.33, -87.68, -87.7, -88.0, -88.1],
                        [0.0, -0.0, 1e-30, -1e-30, 17.0, -17.0, 104.0, -104.0, 1e30, -1e30, 3e38, -3e38,
                         np.inf, -np.inf, np.nan]]).astype(np.float32)
    m = _model("Sigmoid", [("x", np.float32, x.shape)], ("y", np.float32, x.shape), opset=13)
    got = _run(m, {"x": x}, tmp_path, variant)
    with np.errstate(over="ignore"):
        ref = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    fin = np.isfinite(x)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=4e-6, atol=2.0 ** -126)
    assert np.isnan(got[np.isnan(x)]).all()
    assert got[x == np.inf][0] == 1.0 and got[x == -np.inf][0] == 0.0
