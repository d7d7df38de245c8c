"""The low-precision dtypes (bfloat16, float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz/e8m0, float4e2m1, (u)int4, (u)int2) end to
end: Cast between each of them and every plan dtype, their special values with saturate on and off, QuantizeLinear /
DequantizeLinear to and from them, bfloat16 arithmetic through float32, in bundles built by `packager.package`, run by
wasmtime (SIMD and scalar builds), by the JS runtime in Node and by the aarch64 CLI under qemu, against onnx's
reference evaluator (onnxruntime has no kernel for most of these casts)."""
from __future__ import annotations

import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.ops.op_cast import cast_to

from packager import load_bundle, package
from packager.plan.opcodes import DTYPES
from packager.plan.opspec import DTYPE_TABLE
from tests.test_dtypes import _values as plain_values
from tests.test_web_node import _node_major, _node_run, _outputs

LOWP = [16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26]      # ONNX codes of the low-precision dtypes
OLD = [c for c in DTYPES if c not in LOWP]               # float32, ..., uint64, bool
FLOAT8 = [17, 18, 19, 20]
SMALL_FLOATS = [16, *FLOAT8, 23, 24]
_NARROW_INTS = tuple(DTYPES[c] for c in (21, 22, 25, 26))


def _name(code: int) -> str:
    return DTYPES[code].name


def _info(name: str, code: int, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, code, shape)


def _model(nodes: list, inputs: list, outputs: list) -> onnx.ModelProto:
    m = helper.make_model(helper.make_graph(nodes, "lowp", inputs, outputs), opset_imports=[helper.make_opsetid("", 25)])
    m.ir_version = 11
    return m


def _reference(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return dict(zip([o.name for o in m.graph.output], ReferenceEvaluator(m).run(None, feeds)))


def _reference_cast(x: np.ndarray, to: int) -> np.ndarray:
    """onnx's Cast (saturate=1): ml_dtypes has no direct cast between some pairs (uint4 -> int4, ...); those go
    through int64 from an integer source (wrapping, as Cast does) or float32 from a float one (exact)."""
    try:
        return cast_to(x, to, saturate=True)
    except TypeError:
        return cast_to(x.astype(np.int64 if x.dtype.kind in "biu" or x.dtype in _NARROW_INTS else np.float32), to, True)


def _values(code: int, rng: np.random.Generator, n: int) -> np.ndarray:
    """Values whose cast into every dtype is defined (as tests/test_dtypes.py): every code of a small float whose value
    lies in (-1, 100) (so truncation fits every integer dtype), integers over their whole range, floats in (-1, 100)."""
    dt = DTYPES[code]
    if code in SMALL_FLOATS:
        v = _all_codes(code)
        f = v.astype(np.float64)
        keep = v[np.isfinite(f) & (f > -1) & (f < 100)]
        return keep[rng.choice(len(keep), min(n, len(keep)), replace=False)] if len(keep) > n else keep
    if code in (21, 22, 25, 26):
        ii = ml_dtypes.iinfo(dt)
        return np.arange(int(ii.min), int(ii.max) + 1).astype(dt)
    return plain_values(dt.type, rng, n)


def _all_codes(code: int) -> np.ndarray:
    """Every code of a small float format (NaN, infinities, subnormals, the largest values)."""
    dt = DTYPES[code]
    bits = np.arange(1 << (8 * dt.itemsize), dtype=np.uint16 if dt.itemsize == 2 else np.uint8)
    return (bits[:16] if code == 23 else bits).view(dt)


def _cast_pairs() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One model: each low-precision dtype cast to every plan dtype and every plan dtype cast to each of them, plus
    every code of each small float format to the wide floats and bool (specials included)."""
    rng = np.random.default_rng(16)
    nodes, ins, outs, feeds = [], [], [], {}
    for s in DTYPES:
        groups = [(f"x_{_name(s)}", _values(s, rng, 24), list(DTYPES) if s in LOWP else LOWP)]
        if s in SMALL_FLOATS:
            groups.append((f"all_{_name(s)}", _all_codes(s), [1, 10, 11, 9]))
        for x, data, targets in groups:
            feeds[x] = data
            ins.append(_info(x, s, list(data.shape)))
            for d in targets:
                y = f"{x}_to_{_name(d)}"
                nodes.append(helper.make_node("Cast", [x], [y], to=d))
                outs.append(_info(y, d, list(data.shape)))
    return _model(nodes, ins, outs), feeds


def _assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    """Same dtype, same values (NaN where NaN; floats compared as float64, so -0 == 0 here: signs are checked by
    test_special_values_bits)."""
    assert set(got) == set(want)
    for k, w in want.items():
        assert got[k].dtype == w.dtype, (k, got[k].dtype, w.dtype)
        if w.dtype.kind in "biu" or w.dtype in _NARROW_INTS:
            np.testing.assert_array_equal(got[k].astype(np.int64), w.astype(np.int64), err_msg=k)
        else:
            np.testing.assert_array_equal(got[k].astype(np.float64), w.astype(np.float64), err_msg=k)


@pytest.fixture(scope="module")
def cast_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, onnx.ModelProto, dict, dict]:
    m, feeds = _cast_pairs()
    want = {n.output[0]: _reference_cast(feeds[n.input[0]], n.attribute[0].i) for n in m.graph.node}
    return package(m, out=tmp_path_factory.mktemp("lowp") / "b", verify=False), m, feeds, want


@pytest.mark.parametrize("variant", ["simd", "scalar"])
def test_cast_every_pair_vs_reference(cast_bundle, variant: str) -> None:
    bundle, _, feeds, want = cast_bundle
    _assert_same(load_bundle(bundle, variant).run(feeds), want)


def _specials() -> np.ndarray:
    """float32 values at every format's edges: NaN, infinities, signed zeros, the largest finite values and just
    beyond, ties at the largest values, subnormals and values below half the smallest subnormal."""
    v = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 448.0, 464.0, 465.0, -480.0, 240.0, 247.0, 248.0, 57344.0, 61440.0,
         61441.0, -1e6, 6.0, 7.0, -7.0, 0.25, 0.24, 2.0 ** -9, 2.0 ** -10, 2.0 ** -11, -2.0 ** -17, 2.0 ** -18, 1e-30,
         3.4e38, 3.3895e38, 1.1e-38, 2.0 ** -133, 2.0 ** -134, 1.5, 2.5, 0.75, 1.0 + 2.0 ** -4, 1.0 + 3 * 2.0 ** -4,
         2.0 ** 127 * 1.5, 2.0 ** -127, 0.124, 5.0 * 2.0 ** -8]
    return np.array(v, np.float32)


def test_special_values_bits(tmp_path: Path) -> None:
    """Every small float target from float32 specials, float8 with saturate 1 and 0, float8e8m0 with each round_mode:
    the codes, bit for bit, are the reference's (NaN: any NaN code of the format)."""
    x = _specials()
    nodes, outs = [], []
    for d in SMALL_FLOATS:
        for sat in ((1, 0) if d in (*FLOAT8, 24) else (None,)):
            for mode in (("up", "down", "nearest") if d == 24 else (None,)):
                y = f"to_{_name(d)}_{sat}_{mode}"
                kw = {k: v for k, v in (("saturate", sat), ("round_mode", mode)) if v is not None}
                nodes.append(helper.make_node("Cast", ["x"], [y], to=d, **kw))
                outs.append(_info(y, d, [len(x)]))
    m = _model(nodes, [_info("x", 1, [len(x)])], outs)
    want = _reference(m, {"x": x})
    bundle = package(m, out=tmp_path / "b", verify=False)
    for variant in ("simd", "scalar"):
        got = load_bundle(bundle, variant).run({"x": x})
        for k, w in want.items():
            wf, gf = w.astype(np.float64), got[k].astype(np.float64)
            nan = np.isnan(wf)
            np.testing.assert_array_equal(np.isnan(gf), nan, err_msg=f"{variant} {k}")
            u = np.uint16 if w.dtype.itemsize == 2 else np.uint8
            np.testing.assert_array_equal(got[k].view(u)[~nan], w.view(u)[~nan], err_msg=f"{variant} {k}")


def _qdq_model() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """QuantizeLinear / DequantizeLinear to and from float8, float4 and (u)int4/2: per tensor with a zero point,
    per axis, a float16 scale and output, saturate 0; int16 per axis and blocked int4; every scale and zero point
    fed at run time."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((3, 8)) * 40).astype(np.float32)
    x[0, :4] = [1e6, -1e6, 2.5, -0.0]   # no infinities: the reference rounds them to INT32_MIN for integers
    nodes, ins, outs = [], [_info("x", 1, [3, 8])], []
    feeds: dict[str, np.ndarray] = {"x": x}
    for k, d in enumerate([17, 18, 19, 20, 23, 21, 22, 25, 26]):
        dt = DTYPES[d]
        per_axis = d in (21, 22, 25, 26, 23)
        s, z, q, y = f"s{k}", f"z{k}", f"q_{_name(d)}", f"y_{_name(d)}"
        n = 3 if per_axis else 1
        feeds[s] = (rng.random(n) * 4 + 0.5).astype(np.float32).reshape([n] if per_axis else [])
        # float8 zero points must be 0 (onnx's reference refuses others); float4's is added by Q, not read by DQ
        zero = ml_dtypes.iinfo(dt).min + 1 if d in (22, 26) else 1 if d in (21, 25, 23) else 0
        feeds[z] = np.full([n] if per_axis else [], zero).astype(dt)
        ins += [_info(s, 1, list(feeds[s].shape)), _info(z, d, list(feeds[z].shape))]
        nodes += [helper.make_node("QuantizeLinear", ["x", s, z], [q], axis=0),
                  helper.make_node("DequantizeLinear", [q, s, z], [y], axis=0)]
        outs += [_info(q, d, [3, 8]), _info(y, 1, [3, 8])]
        if d == 17:   # saturate 0: out-of-range values become NaN; float16 scale and output
            nodes += [helper.make_node("QuantizeLinear", ["x", s, z], ["q_nosat"], saturate=0),
                      helper.make_node("Cast", [s], ["s16"], to=10),
                      helper.make_node("DequantizeLinear", [q, "s16", z], ["y16"])]
            outs += [_info("q_nosat", d, [3, 8]), _info("y16", 10, [3, 8])]
    # (u)int16 per axis and blocked int4 (block_size 4 along axis 1: the scale [3, 2]), through float32 steps
    feeds["si16"], feeds["zi16"] = (rng.random(3) * 0.01 + 0.001).astype(np.float32), np.array([-7, 0, 300], np.int16)
    feeds["sb"], feeds["zb"] = (rng.random((3, 2)) * 4 + 0.5).astype(np.float32), np.array([[1, -2], [0, 3], [-8, 7]], DTYPES[22])
    ins += [_info("si16", 1, [3]), _info("zi16", 5, [3]), _info("sb", 1, [3, 2]), _info("zb", 22, [3, 2])]
    nodes += [helper.make_node("QuantizeLinear", ["x", "si16", "zi16"], ["q_i16"], axis=0),
              helper.make_node("DequantizeLinear", ["q_i16", "si16", "zi16"], ["y_i16"], axis=0),
              helper.make_node("QuantizeLinear", ["x", "sb", "zb"], ["q_blk"], axis=1, block_size=4),
              helper.make_node("DequantizeLinear", ["q_blk", "sb", "zb"], ["y_blk"], axis=1, block_size=4)]
    outs += [_info("q_i16", 5, [3, 8]), _info("y_i16", 1, [3, 8]), _info("q_blk", 22, [3, 8]), _info("y_blk", 1, [3, 8])]
    return _model(nodes, ins, outs), feeds


def test_qdq_vs_reference(tmp_path: Path) -> None:
    m, feeds = _qdq_model()
    want = _reference(m, feeds)
    bundle = package(m, out=tmp_path / "b", verify=False)
    for variant in ("simd", "scalar"):
        _assert_same(load_bundle(bundle, variant).run(feeds), want)


def test_bfloat16_arithmetic_through_float32(tmp_path: Path) -> None:
    """bfloat16 Add / Mul / Div / Max / Less / data movement as float16: computed in float32, rounded once."""
    rng = np.random.default_rng(7)
    bf = DTYPES[16]
    a, b = (rng.random(12) * 8 - 4).astype(bf), (rng.random(12) * 8 + 0.5).astype(bf)
    ops = ["Add", "Mul", "Div", "Max", "Less"]
    nodes = [helper.make_node(op, ["a", "b"], [op]) for op in ops] + [helper.make_node("Transpose", ["a2"], ["T"])]
    nodes.insert(0, helper.make_node("Reshape", ["a", "shape"], ["a2"]))
    outs = [_info(op, 9 if op == "Less" else 16, [12]) for op in ops] + [_info("T", 16, [4, 3])]
    m = _model(nodes, [_info("a", 16, [12]), _info("b", 16, [12])], outs)
    m.graph.initializer.append(onnx.numpy_helper.from_array(np.array([3, 4], np.int64), "shape"))
    feeds = {"a": a, "b": b}
    want = {"Add": (a.astype(np.float32) + b.astype(np.float32)).astype(bf),
            "Mul": (a.astype(np.float32) * b.astype(np.float32)).astype(bf),
            "Div": (a.astype(np.float32) / b.astype(np.float32)).astype(bf),
            "Max": np.maximum(a.astype(np.float32), b.astype(np.float32)).astype(bf),
            "Less": a.astype(np.float32) < b.astype(np.float32), "T": a.reshape(3, 4).T}
    got = load_bundle(package(m, out=tmp_path / "b", verify=False), "simd").run(feeds)
    _assert_same(got, want)


@pytest.mark.skipif(_node_major() < 20, reason="needs Node >= 20")
def test_node_feeds_and_returns_lowp(tmp_path: Path, cast_bundle) -> None:
    """The JS runtime takes and gives each low-precision dtype as its TypedArray (bfloat16 Uint16Array bits, float8 and
    float4 Uint8Array codes, int4/int2 Int8Array values, one per element): the same bytes as wasmtime's."""
    bundle, _, feeds, want = cast_bundle
    ctor = {k: DTYPE_TABLE[next(c for c in DTYPES if DTYPES[c] == v.dtype)][2] for k, v in feeds.items()}
    res = _node_run(tmp_path, bundle, feeds, variant="simd", ctor=ctor)
    got = _outputs(res)
    for name, o in res["outputs"].items():
        assert o["ctor"] == DTYPE_TABLE[next(c for c in DTYPES if DTYPES[c].name == o["dtype"])][2], name
    _assert_same(got, want)


@pytest.mark.skipif(shutil.which("qemu-aarch64") is None, reason="qemu-user missing")
def test_pi5_cli_lowp_under_qemu(tmp_path: Path) -> None:
    """edgepack-run (aarch64, NEON build) under qemu: low-precision inputs and outputs in their .npy carriers
    (bfloat16 as uint16 bits, float8 as uint8 codes, int4 as int8 values), Cast and QDQ as the reference."""
    from packager.targets import edge as E
    from tests.test_edge import _cli, _save_inputs
    x = _specials()[np.isfinite(_specials())][:16]
    nodes = [helper.make_node("Cast", ["x"], ["bf"], to=16), helper.make_node("Cast", ["x"], ["e4"], to=17, saturate=0),
             helper.make_node("Cast", ["h"], ["back"], to=1), helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q4"]),
             helper.make_node("DequantizeLinear", ["q4", "s", "z"], ["dq"])]
    m = _model(nodes, [_info("x", 1, [16]), _info("h", 16, [16]), _info("s", 1, []), _info("z", 22, [])],
               [_info("bf", 16, [16]), _info("e4", 17, [16]), _info("back", 1, [16]), _info("q4", 22, [16]),
                _info("dq", 1, [16])])
    feeds = {"x": x, "h": x.astype(DTYPES[16]), "s": np.array(0.5, np.float32), "z": np.array(-2, DTYPES[22])}
    want = _reference(m, feeds)
    b = package(m, target="pi5", out=tmp_path / "b", verify=False)
    carriers = {k: v.view(np.uint16) if k == "h" else v.astype(np.int8) if k == "z" else v for k, v in feeds.items()}
    outs = [a for n in want for a in ("--output", f"{n}={tmp_path / n}.npy")]
    r = _cli(b / "edgepack-run", b, *_save_inputs(tmp_path, carriers), *outs, qemu=True)
    assert r.returncode == 0, r.stderr
    got = {n: np.load(tmp_path / f"{n}.npy") for n in want}
    assert (got["bf"].dtype, got["e4"].dtype, got["q4"].dtype) == (np.uint16, np.uint8, np.int8)
    _assert_same({n: g.view(want[n].dtype) if n in ("bf", "e4") else g.astype(want[n].dtype) for n, g in got.items()}, want)
    assert E.qemu_available()
