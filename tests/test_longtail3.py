"""The long tail, third part (issue 18): LpNormalization, CumProd (AXIS mode 5), EyeLike, BitCast, CenterCropPad,
Col2Im, TensorScatter, DeformConv, BitwiseAnd/Or/Xor/Not (BINARY 20..22), integer Pow, and float16 / float64 CumSum,
ReduceLogSumExp, Einsum, MatMul, Softmax through float32 (packager/ops/layout_rewrites.py, deform_conv.py,
norm_rewrites.py, index_ops.py, elementwise.py). One model built with onnx.helper holds them all: packaged by the CLI for web, run
under wasmtime (SIMD and scalar builds) and in Node, packaged for pi5 and run by edgepack-run under qemu-aarch64,
each output compared with onnxruntime. Refusals: a clear `error:` line naming op, node and opset."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from packager import load_bundle
from packager.targets import edge as E

from .conftest import PORTABLE_AND_VECTOR, REPO
from .test_web_dynamic import _node_runs, _outputs
from .test_web_node import _node_major

OPSET = 26
RNG = np.random.default_rng(18)


def _feeds() -> dict[str, np.ndarray]:
    return {"x": RNG.standard_normal((3, 4, 5)).astype(np.float32),
            "xl": RNG.integers(-2**40, 2**40, (3, 4)).astype(np.int64),
            "xl2": RNG.integers(-2**40, 2**40, (4,)).astype(np.int64),
            "xp": RNG.integers(-3, 4, (3, 4)).astype(np.int64),
            "xu": RNG.integers(0, 256, (3, 4)).astype(np.uint8),
            "xu2": RNG.integers(0, 256, (3, 4)).astype(np.uint8),
            "img": RNG.standard_normal((2, 5, 7)).astype(np.float32),
            "cols": RNG.standard_normal((1, 8, 30)).astype(np.float32),
            "cache": RNG.standard_normal((2, 5, 3)).astype(np.float32),
            "upd": RNG.standard_normal((2, 2, 3)).astype(np.float32),
            "wi": np.array([1, 4], np.int64),
            "dx": RNG.standard_normal((1, 4, 6, 7)).astype(np.float32),
            "doff": RNG.standard_normal((1, 2 * 2 * 9, 5, 6)).astype(np.float32),
            "dmask": RNG.uniform(0, 1, (1, 2 * 9, 5, 6)).astype(np.float32)}


NODES = [  # (op, inputs, output, attributes)
    ("LpNormalization", ["x"], "lp1", {"axis": 1, "p": 1}),
    ("LpNormalization", ["x"], "lp2", {}),
    ("CumProd", ["x", "ax2"], "cp", {"exclusive": 1, "reverse": 1}),
    ("CumProd", ["xp", "ax1"], "cpl", {}),
    ("Cast", ["x"], "xh", {"to": T.FLOAT16}),
    ("CumSum", ["xh", "ax0"], "cs16", {}),
    ("Cast", ["x"], "xd", {"to": T.DOUBLE}),
    ("ReduceLogSumExp", ["xd", "axes2"], "lse", {"keepdims": 0}),
    ("Einsum", ["xd", "xd"], "ein", {"equation": "ijk,ijl->ikl"}),
    ("Softmax", ["xh"], "sm16", {}),
    ("MatMul", ["xh", "wh"], "mm16", {}),   # a float16 weight: widened once at bind
    ("EyeLike", ["xl"], "eye", {"k": 1, "dtype": T.FLOAT}),
    ("BitCast", ["x"], "bc", {"to": T.INT32}),
    ("CenterCropPad", ["img", "crop"], "ccp", {"axes": [1, 2]}),
    ("Col2Im", ["cols", "image", "block"], "c2i", {"pads": [1, 0, 0, 1]}),
    ("TensorScatter", ["cache", "upd", "wi"], "ts", {"mode": "circular", "axis": 1}),
    ("BitwiseAnd", ["xl", "xl2"], "band", {}),
    ("BitwiseOr", ["xu", "xu2"], "bor", {}),
    ("BitwiseXor", ["xl", "xl2"], "bxor", {}),
    ("BitwiseNot", ["xu"], "bnot", {}),
    ("Pow", ["xp", "pe"], "pw", {}),
    ("DeformConv", ["dx", "dw", "doff", "db", "dmask"], "dc", {"group": 2, "offset_group": 2, "pads": [1, 0, 0, 1]}),
]
CONSTS = {"ax0": np.array(0, np.int64), "ax1": np.array(1, np.int64), "ax2": np.array(2, np.int64),
          "axes2": np.array([2], np.int64), "crop": np.array([3, 9], np.int64), "image": np.array([5, 6], np.int64),
          "block": np.array([2, 2], np.int64), "pe": np.array([0, 1, 2, 3], np.int64),
          "dw": RNG.standard_normal((6, 2, 3, 3)).astype(np.float32), "db": RNG.standard_normal(6).astype(np.float32),
          "wh": RNG.standard_normal((5, 3)).astype(np.float16)}
OUTPUTS = [out for _, _, out, _ in NODES if out not in ("xh", "xd")]


def _model() -> onnx.ModelProto:
    feeds = _feeds()
    g = helper.make_graph(
        [helper.make_node(op, ins, [out], name=out, **attrs) for op, ins, out, attrs in NODES], "longtail3",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()],
        [helper.make_empty_tensor_value_info(o) for o in OUTPUTS],
        [numpy_helper.from_array(v, k) for k, v in CONSTS.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 10
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    m.graph.ClearField("output")
    m.graph.output.extend(inferred.graph.output)
    return m


def _reference(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(OUTPUTS, s.run(OUTPUTS, feeds)))


def _close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.dtype}{got.shape} != {want.dtype}{want.shape}"
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:   # float16 outputs: one float16 rounding apart at most (computed in float32, rounded once)
        tol = 1e-3 if want.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol, err_msg=what)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "packager.cli", *args], capture_output=True, text=True, cwd=REPO)


@pytest.fixture(scope="module")
def packaged(tmp_path_factory) -> tuple[Path, Path, dict[str, np.ndarray], dict[str, np.ndarray]]:
    d = tmp_path_factory.mktemp("longtail3")
    m = _model()
    onnx.save(m, d / "m.onnx")
    r = _cli(str(d / "m.onnx"), "-o", str(d / "web"), "--no-verify")
    assert r.returncode == 0, r.stderr
    feeds = _feeds()
    return d, d / "web", feeds, _reference(m, feeds)


def test_wasm_builds_match_onnxruntime(packaged) -> None:
    _, bundle, feeds, want = packaged
    for v in PORTABLE_AND_VECTOR:
        got = load_bundle(bundle, v).run(feeds)
        for o in OUTPUTS:
            _close(got[o], want[o], f"{o} [{v}]")


@pytest.mark.skipif(_node_major() < 20, reason="needs Node >= 20")
def test_node_matches_onnxruntime(packaged, tmp_path: Path) -> None:
    _, bundle, feeds, want = packaged
    got = _outputs(_node_runs(tmp_path, bundle, [feeds])["runs"][0])
    for o in OUTPUTS:
        _close(got[o], want[o], f"{o} [node]")


@pytest.mark.skipif(shutil.which("qemu-aarch64") is None or shutil.which("aarch64-linux-gnu-gcc") is None,
                    reason="qemu-user / gcc-aarch64-linux-gnu missing")
def test_edgepack_run_under_qemu(packaged) -> None:
    d, _, feeds, want = packaged
    r = _cli(str(d / "m.onnx"), "--target", "pi5", "-o", str(d / "pi5"))
    assert r.returncode == 0, r.stderr
    args = []
    for k, v in feeds.items():
        np.save(d / f"in_{k}.npy", v)
        args += ["--input", f"{k}={d / f'in_{k}.npy'}"]
    checked = ["lp1", "cp", "cpl", "cs16", "lse", "c2i", "ts", "band", "bor", "bxor", "bnot", "pw", "dc"]
    for o in checked:
        args += ["--output", f"{o}={d / f'out_{o}.npy'}"]
    run = subprocess.run([*E.qemu_cmd("pi5"), str(d / "pi5" / "edgepack-run"), str(d / "pi5"), *args],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    for o in checked:
        _close(np.load(d / f"out_{o}.npy"), want[o], f"{o} [aarch64]")


BAD = [  # (op, inputs, output type, constants, attributes, the reason named)
    ("BitCast", {"a": (T.FLOAT, [4])}, (T.INT64, [4]), {}, {"to": T.INT64}, "only between dtypes of one size"),
    ("Col2Im", {"c": (T.FLOAT, [1, 8, 7])}, (T.FLOAT, [1, 2, 5, 6]),
     {"i": np.array([5, 6], np.int64), "b": np.array([2, 2], np.int64)}, {}, "does not hold C * 4 rows of 20 blocks"),
    ("LpNormalization", {"l": (T.FLOAT, [2, 3])}, (T.FLOAT, [2, 3]), {}, {"p": 3}, "p is 1 or 2"),
    ("BitwiseAnd", {"f": (T.FLOAT, [2]), "g": (T.FLOAT, [2])}, (T.FLOAT, [2]), {}, {}, "dtype float32"),
]


def test_refusals_name_op_node_and_reason(tmp_path: Path) -> None:
    """One model, four nodes the packager refuses: one `error:` report names each op, node and reason."""
    nodes, ins, outs, inits = [], [], [], []
    for k, (op, i, out, consts, attrs, _) in enumerate(BAD):
        nodes.append(helper.make_node(op, list(i) + list(consts), [f"y{k}"], name=f"bad{k}", **attrs))
        ins += [helper.make_tensor_value_info(n, dt, sh) for n, (dt, sh) in i.items()]
        outs.append(helper.make_tensor_value_info(f"y{k}", *out))
        inits += [numpy_helper.from_array(v, n) for n, v in consts.items()]
    m = helper.make_model(helper.make_graph(nodes, "bad", ins, outs, inits), opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 10
    onnx.save(m, tmp_path / "bad.onnx")
    r = _cli(str(tmp_path / "bad.onnx"), "-o", str(tmp_path / "b"), "--no-verify")
    assert r.returncode != 0 and "Traceback" not in r.stderr and r.stderr.startswith("error:"), r.stderr
    for k, (op, *_, why) in enumerate(BAD):
        line = next((ln for ln in r.stderr.splitlines() if f"bad{k}" in ln), "")
        assert op in line and why in line and f"opset {OPSET}" in r.stderr, (k, r.stderr)
