"""Every dtype a plan holds (float32, float16, float64, (u)int 8/16/32/64, bool) end to end: Cast between every
pair and the integer elementwise ops, in bundles built by `packager.package`, run by wasmtime (SIMD and scalar
builds) and by the JS runtime in Node, compared with onnxruntime; the dtypes the runtime lacks are refused at
package time naming them."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from packager import load_bundle, package
from packager.errors import PackagerError
from tests.test_web_node import _node_major, _node_run, _outputs

DTYPES = [np.float32, np.float16, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
          np.uint64, np.bool_]
INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
CTORS = {"float32": "Float32Array", "float16": "Uint16Array", "float64": "Float64Array", "int8": "Int8Array",
         "uint8": "Uint8Array", "int16": "Int16Array", "uint16": "Uint16Array", "int32": "Int32Array",
         "uint32": "Uint32Array", "int64": "BigInt64Array", "uint64": "BigUint64Array", "bool": "Uint8Array"}


def _code(dt: type) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dt))


def _name(dt: type) -> str:
    return np.dtype(dt).name


def _info(name: str, dt: type, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, _code(dt), shape)


def _model(nodes: list, inputs: list, outputs: list, opset: int = 19) -> onnx.ModelProto:
    m = helper.make_model(helper.make_graph(nodes, "dtypes", inputs, outputs), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def _ort(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in m.graph.output], s.run(None, feeds)))


def _assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want)
    for k, w in want.items():
        assert got[k].dtype == w.dtype, (k, got[k].dtype, w.dtype)
        np.testing.assert_array_equal(got[k], w, err_msg=k)


def _values(dt: type, rng: np.random.Generator, n: int) -> np.ndarray:
    """Values whose cast into every dtype is defined: integers over their whole range (integer -> integer
    wraps), floats in (-1, 100) with fractions (truncation toward zero fits every integer dtype)."""
    if np.dtype(dt).kind == "f":
        x = rng.random(n) * 100.9 - 0.9
        x[:4] = [0.0, -0.0, 0.5, -0.5]
        return x.astype(dt)
    if dt == np.bool_:
        return rng.random(n) < 0.5
    ii = np.iinfo(dt)
    x = rng.integers(ii.min, ii.max, n, dtype=dt, endpoint=True)
    x[:3] = [ii.min, ii.max, 0]
    return x


def _float_specials(dt: type) -> np.ndarray:
    """NaN, infinities, signed zeros, subnormals of float16 and float32, values overflowing the narrower floats,
    float16 ties (round to nearest even)."""
    v = [np.nan, np.inf, -np.inf, 0.0, -0.0, 6e-8, -3e-5, 1e-40, 65504.0, 65520.0, -70000.0, 3.4e38, 1e39, -1e300,
         1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 2049.0, 1e-310]
    with np.errstate(over="ignore"):
        return np.array(v, np.float64).astype(dt)


def _cast_all_pairs() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One model: every source dtype cast to every dtype (144 Casts), float sources also with their specials
    (to the floats and bool only: float -> integer is undefined for them)."""
    rng = np.random.default_rng(18)
    nodes, ins, outs, feeds = [], [], [], {}
    for s in DTYPES:
        groups = [(f"x_{_name(s)}", _values(s, rng, 24), DTYPES)]
        if np.dtype(s).kind == "f":
            groups.append((f"s_{_name(s)}", _float_specials(s), [np.float32, np.float16, np.float64, np.bool_]))
        for x, data, targets in groups:
            feeds[x] = data
            ins.append(_info(x, s, list(data.shape)))
            for d in targets:
                y = f"{x}_to_{_name(d)}"
                nodes.append(helper.make_node("Cast", [x], [y], to=_code(d)))
                outs.append(_info(y, d, list(data.shape)))
    return _model(nodes, ins, outs), feeds


@pytest.fixture(scope="module")
def cast_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, onnx.ModelProto, dict]:
    m, feeds = _cast_all_pairs()
    return package(m, out=tmp_path_factory.mktemp("cast") / "b", verify=False), m, feeds


@pytest.mark.parametrize("variant", ["simd", "scalar"])
def test_cast_every_pair_vs_ort(cast_bundle, variant: str) -> None:
    bundle, m, feeds = cast_bundle
    _assert_same(load_bundle(bundle, variant).run(feeds), _ort(m, feeds))


def test_cast_float64_to_float16_rounds_once(tmp_path: Path) -> None:
    # Just above a float16 tie: rounding to float32 first would land on the tie and round to even (1.0).
    x = np.array([1.0 + 2.0 ** -11 + 2.0 ** -40, -(1.0 + 2.0 ** -11 + 2.0 ** -40), 1.0 + 2.0 ** -11, 65519.99], np.float64)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16)], [_info("x", np.float64, [4])],
               [_info("y", np.float16, [4])])
    got = load_bundle(package(m, out=tmp_path / "b", verify=False), "simd").run({"x": x})["y"]
    np.testing.assert_array_equal(got.view(np.uint16), x.astype(np.float16).view(np.uint16))


_ARITH = ["Add", "Sub", "Mul", "Div", "Mod", "Min", "Max"]
_CMP = ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]


def _int_ops_model(dt: type) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Every integer BINARY function on dtype dt, with broadcasting, and Abs / Neg / Clip, against onnxruntime's kernels
    for it (Min/Max/Clip of (u)int16 and BitShift of the signed dtypes have none: left out)."""
    rng = np.random.default_rng(int(np.dtype(dt).num))
    a = _values(dt, rng, 60).reshape(3, 4, 5)
    b = _values(dt, rng, 5)
    b[b == 0] = 3                                 # onnxruntime traps on x / 0 and INT_MIN / -1: the runtime's
    if np.dtype(dt).kind == "i":                  # x / 0 = 0 is checked against numpy below
        b[b == -1] = -7
    b[:2] = [7, 3] if np.dtype(dt).kind == "u" else [-7, 3]
    sh = rng.integers(0, 8 * np.dtype(dt).itemsize, 5).astype(dt)
    ops = [op for op in _ARITH + _CMP if not (op in ("Min", "Max") and dt in (np.int16, np.uint16))]
    nodes = [helper.make_node(op, ["a", "b"], [op]) for op in ops]
    nodes.append(helper.make_node("Mod", ["a", "b"], ["Fmod"], fmod=1))
    outs = [_info(op, np.bool_ if op in _CMP else dt, [3, 4, 5]) for op in ops] + [_info("Fmod", dt, [3, 4, 5])]
    if np.dtype(dt).kind == "u" and dt != np.uint16:
        nodes += [helper.make_node("BitShift", ["a", "sh"], [d], direction=d.upper()) for d in ("Left", "Right")]
        outs += [_info(d, dt, [3, 4, 5]) for d in ("Left", "Right")]
    for op in ("Abs", "Neg") if np.dtype(dt).kind == "i" else ("Abs",):   # through BINARY: 0 - x, max(x, 0 - x)
        nodes.append(helper.make_node(op, ["a"], [op]))
        outs.append(_info(op, dt, [3, 4, 5]))
    if dt not in (np.int16, np.uint16):
        nodes += [helper.make_node("Clip", ["a", "lo", "hi"], ["Clip"]), helper.make_node("Clip", ["a", "", "lo"], ["ClipHi"])]
        outs += [_info("Clip", dt, [3, 4, 5]), _info("ClipHi", dt, [3, 4, 5])]
    lo, hi = np.sort(rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, 2, dtype=dt, endpoint=True))
    ins = [_info(n, dt, s) for n, s in (("a", [3, 4, 5]), ("b", [5]), ("sh", [5]), ("lo", []), ("hi", []))]
    return _model(nodes, ins, outs), {"a": a, "b": b, "sh": sh, "lo": np.array(lo, dt), "hi": np.array(hi, dt)}


@pytest.mark.parametrize("dt", INTS, ids=_name)
def test_int_binary_ops_vs_ort(tmp_path: Path, dt: type) -> None:
    m, feeds = _int_ops_model(dt)
    bundle = package(m, out=tmp_path / "b", verify=False)
    got, want = load_bundle(bundle, "simd").run(feeds), _ort(m, feeds)
    # onnxruntime's integer fmod goes through double (inexact above 2^53): numpy's, exact, is the reference
    want["Fmod"] = np.fmod(feeds["a"], feeds["b"])
    _assert_same(got, want)


def test_int_division_by_zero_is_zero(tmp_path: Path) -> None:
    for dt in (np.int16, np.uint32, np.uint64):
        a, b = np.array([7, 9, 12], dt), np.array([0, 2, 0], dt)
        m = _model([helper.make_node("Div", ["a", "b"], ["q"]), helper.make_node("Mod", ["a", "b"], ["r"])],
                   [_info("a", dt, [3]), _info("b", dt, [3])], [_info("q", dt, [3]), _info("r", dt, [3])])
        got = load_bundle(package(m, out=tmp_path / _name(dt), verify=False), "simd").run({"a": a, "b": b})
        np.testing.assert_array_equal(got["q"], np.array([0, 4, 0], dt))
        np.testing.assert_array_equal(got["r"], np.array([0, 1, 0], dt))


@pytest.mark.skipif(_node_major() < 20, reason="needs Node >= 20")
def test_node_feeds_and_returns_every_dtype(tmp_path: Path, cast_bundle) -> None:
    """The JS runtime takes and gives each dtype as its TypedArray (BigUint64Array, Float64Array, ...)."""
    bundle, m, feeds = cast_bundle
    res = _node_run(tmp_path, bundle, feeds, variant="simd", ctor={k: CTORS[v.dtype.name] for k, v in feeds.items()})
    got = _outputs(res)
    for name, o in res["outputs"].items():
        assert o["ctor"] == CTORS[o["dtype"]], name
    _assert_same(got, _ort(m, feeds))


def test_unsupported_dtypes_refused(tmp_path: Path) -> None:
    x = _info("x", np.float32, [3])
    for k, (to, name) in enumerate([(TensorProto.STRING, "STRING"), (TensorProto.COMPLEX64, "COMPLEX64")]):
        m = _model([helper.make_node("Cast", ["x"], ["y"], to=to)], [x], [helper.make_tensor_value_info("y", to, [3])],
                   opset=21)
        with pytest.raises(PackagerError, match=f"Cast.*cast to {name} is not supported"):
            package(m, out=tmp_path / str(k), verify=False)
    # float64 compares are not rounded to float32 (that would change answers): refused
    m = _model([helper.make_node("Less", ["a", "a"], ["y"])], [_info("a", np.float64, [3])], [_info("y", np.bool_, [3])])
    with pytest.raises(PackagerError, match="Less.*dtype float64 of 'a' is not supported"):
        package(m, out=tmp_path / "less", verify=False)


_FLOAT_OPS = ["Add", "Sub", "Mul", "Div", "Max", "Sum", "Abs", "Neg", "Exp", "Sqrt"]


@pytest.mark.parametrize("dt", [np.float16, np.float64], ids=_name)
def test_float16_float64_via_float32(tmp_path: Path, dt: type) -> None:
    """float16 and float64 arithmetic through the float32 kernels: float16 rounded once per op (as numpy's float16
    arithmetic), float64 within float32 precision of onnxruntime's, and the manifest says so."""
    rng = np.random.default_rng(5)
    a, b = (rng.random(12) * 4 + 0.25).astype(dt), (rng.random(12) * 4 + 0.25).astype(dt)
    nodes = [helper.make_node(op, ["a"] if op in ("Abs", "Neg", "Exp", "Sqrt") else ["a", "b"], [op]) for op in _FLOAT_OPS]
    m = _model(nodes, [_info("a", dt, [12]), _info("b", dt, [12])], [_info(op, dt, [12]) for op in _FLOAT_OPS])
    bundle = package(m, out=tmp_path / "b", verify=False)
    got = load_bundle(bundle, "simd").run({"a": a, "b": b})
    if dt == np.float16:
        f32 = {"Add": a + b, "Sub": a - b, "Mul": a * b, "Div": a / b, "Max": np.maximum(a, b), "Sum": a + b,
               "Abs": np.abs(a), "Neg": -a}
        for op, w in f32.items():
            np.testing.assert_array_equal(got[op], w, err_msg=op)
        np.testing.assert_allclose(got["Exp"], np.exp(a), rtol=1e-3)
        np.testing.assert_allclose(got["Sqrt"], np.sqrt(a), rtol=1e-3)
    else:
        want = _ort(m, {"a": a, "b": b})
        for op in _FLOAT_OPS:
            assert got[op].dtype == np.float64
            np.testing.assert_allclose(got[op], want[op], rtol=3e-7, err_msg=op)
        notices = json.loads((bundle / "manifest.json").read_text())["notices"]
        assert any("Add 'Add': float64 computed in float32" in n for n in notices), notices
