"""QLUT: 8-bit elementwise regions of QDQ graphs (onnxruntime's SiLU export, a HardSwish, a Sigmoid) as one table
lookup whose table onnxruntime computes at package time (packager/passes/qdq_lut.py): the same bytes as
onnxruntime running the region unoptimized, on every build."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.plan import layout
from packager.plan.opcodes import Op
from packager.targets import edge as E

from .conftest import VARIANTS, make_model
from .param_mutants import check_hostile_params

SHAPE = [1, 3, 7, 13]   # 273 elements: whole vectors and a tail


def _qdq(x: str, s: str, z: str, y: str) -> list:
    return [helper.make_node("QuantizeLinear", [x, s, z], [y + "_q"]), helper.make_node("DequantizeLinear", [y + "_q", s, z], [y])]


def _model(kind: str, zdt: type) -> onnx.ModelProto:
    """x -> Q -> DQ -> region -> Q -> DQ -> y. kind: silu (ORT's export: Sigmoid -> Q -> DQ, Mul), gelu (four Q/DQ
    pairs inside), hardswish, sigmoid
    (a region with scalar constants), or per_channel (a Mul by a [C,1,1] constant: not one byte's function)."""
    z0 = np.array(7 if zdt == np.int8 else 131, zdt)
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for v, n in ((0.047, "xs"), (0.0041, "ss"), (0.029, "ys"))]
    inits += [numpy_helper.from_array(z0, "xz"), numpy_helper.from_array(np.array(0 if zdt == np.int8 else 0, zdt), "sz"),
              numpy_helper.from_array(np.array(-3 if zdt == np.int8 else 40, zdt), "yz")]
    nodes = _qdq("x", "xs", "xz", "xd")
    if kind == "silu":
        nodes += [helper.make_node("Sigmoid", ["xd"], ["sg"]), *_qdq("sg", "ss", "sz", "sgd"),
                  helper.make_node("Mul", ["xd", "sgd"], ["r"])]
    elif kind == "gelu":   # onnxruntime's export of torch's GELU: a Q/DQ pair after every op
        inits += [numpy_helper.from_array(np.array(v, np.float32), n) for v, n in ((1.4142135, "r2"), (1.0, "one"), (0.5, "half"),
                                                                                   (0.0079, "es"), (0.0081, "as"), (0.031, "ms"))]
        nodes += [helper.make_node("Div", ["xd", "r2"], ["dv"]), helper.make_node("Erf", ["dv"], ["e"]), *_qdq("e", "es", "sz", "ed"),
                  helper.make_node("Add", ["ed", "one"], ["a"]), *_qdq("a", "as", "sz", "ad"),
                  helper.make_node("Mul", ["xd", "ad"], ["m"]), *_qdq("m", "ms", "sz", "md"),
                  helper.make_node("Mul", ["md", "half"], ["r"])]
    elif kind == "hardswish":
        nodes += [helper.make_node("HardSwish", ["xd"], ["r"])]
    elif kind == "sigmoid":
        inits += [numpy_helper.from_array(np.array(1.5, np.float32), "k")]
        nodes += [helper.make_node("Mul", ["xd", "k"], ["m"]), helper.make_node("Sigmoid", ["m"], ["r"])]
    else:
        inits += [numpy_helper.from_array(np.array([0.5, 1.0, 2.0], np.float32).reshape(3, 1, 1), "k")]
        nodes += [helper.make_node("Sigmoid", ["xd"], ["sg"]), helper.make_node("Mul", ["sg", "k"], ["r"])]
    nodes += _qdq("r", "ys", "yz", "y")
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)], inits)


def _ort_unoptimized(m: onnx.ModelProto, feeds: dict) -> np.ndarray:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _every_byte() -> dict[str, np.ndarray]:
    """Every byte value of x (x_q spans the 8-bit range and beyond: saturation; so every 16-byte slice of the table
    and every branch of the kernel's select tree is read) and a tail past the whole 16-byte vectors."""
    x = (np.linspace(-7.0, 7.0, int(np.prod(SHAPE))) + np.random.default_rng(3).normal(0, 0.01, int(np.prod(SHAPE))))
    return {"x": x.astype(np.float32).reshape(SHAPE)}


def _ops(bundle: Path) -> list[int]:
    return [n.op for n in layout.decode((bundle / "model.plan").read_bytes()).nodes]


@pytest.mark.parametrize("kind", ["silu", "gelu", "hardswish", "sigmoid"])
@pytest.mark.parametrize("zdt", [np.int8, np.uint8], ids=["int8", "uint8"])
def test_region_is_one_table_with_onnxruntimes_bytes(kind: str, zdt: type, tmp_path: Path) -> None:
    m = _model(kind, zdt)
    out = package(m, out=tmp_path / "b", verify=False)
    ops = _ops(out)
    assert ops.count(Op.QLUT) == 1 and Op.UNARY not in ops and Op.BINARY not in ops, ops
    feeds = _every_byte()
    want = _ort_unoptimized(m, feeds)
    for variant in VARIANTS:
        np.testing.assert_array_equal(load_bundle(out, variant).run(feeds)["y"], want, err_msg=variant)


def test_per_channel_constant_is_not_a_table(tmp_path: Path) -> None:
    """A Mul by a per-channel constant makes the output depend on the channel, not only on the byte: the
    region's Sigmoid may not be folded with it (the float ops run, and agree with onnxruntime)."""
    m = _model("per_channel", np.int8)
    out = package(m, out=tmp_path / "b", verify=False)
    ops = _ops(out)
    assert Op.QLUT not in ops and Op.BINARY in ops, ops
    feeds = {"x": np.random.default_rng(4).normal(0, 2, SHAPE).astype(np.float32)}
    np.testing.assert_allclose(load_bundle(out, "simd").run(feeds)["y"], _ort_unoptimized(m, feeds), atol=0.03)


def test_qlut_refuses_hostile_plans(tmp_path: Path) -> None:
    """Hostile dims of QLUT's tensors (a table that is not 256 bytes, X and Y of different shapes) are refused at
    open or run cleanly, under ASan + UBSan (host build) and without a wasm trap."""
    plan = (package(_model("silu", np.uint8), out=tmp_path / "b", verify=False) / "model.plan").read_bytes()
    assert Op.QLUT in [n.op for n in layout.decode(plan).nodes]
    check_hostile_params([plan], tmp_path, seed=1, min_op=int(Op.QLUT))


@pytest.mark.skipif(shutil.which("qemu-aarch64") is None or shutil.which("aarch64-linux-gnu-gcc") is None,
                    reason="qemu-user / gcc-aarch64-linux-gnu missing")
def test_qlut_on_pi5_under_qemu(tmp_path: Path) -> None:
    """The aarch64 build (Pi 5 CLI under qemu) gives onnxruntime's bytes too."""
    m = _model("silu", np.int8)
    b = package(m, target="pi5", out=tmp_path / "pi5", verify=False)
    assert Op.QLUT in _ops(b)
    feeds = _every_byte()
    got = E.run_cli(b, feeds, json.loads((b / "manifest.json").read_text())["outputs"], qemu=E.qemu_cmd("pi5"))
    np.testing.assert_array_equal(got["y"], _ort_unoptimized(m, feeds))
