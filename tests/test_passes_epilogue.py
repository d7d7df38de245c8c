"""Epilogue activations 4..9 (sigmoid, hardsigmoid, hardswish, tanh, gelu, gelu_tanh) and 43 (SiLU, exported as
x * Sigmoid(x)) fused into every conv/gemm kernel path: im2col CONV, 1x1 direct CONV, WINOGRAD_CONV (and WINOGRAD_CONV_F4), DEPTHWISE_CONV and
GEMM, each with a partial last vector, on the SIMD and scalar builds, against onnxruntime."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from onnx import helper, numpy_helper

from packager import load_bundle, package
from packager.reference import random_inputs, reference_run
from packager.plan import layout
from packager.bundle import Bundle
from packager.plan.opcodes import Op

from .conftest import f32, make_model

ACTIVATIONS = [("Sigmoid", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("HardSwish", {}), ("Tanh", {}),
               ("Gelu", {}), ("Gelu", {"approximate": "tanh"}), ("SiLU", {}), ("GeluErf", {})]


def _act(act: str, attrs: dict, x: str, y: str) -> list:
    """The activation's nodes from x to y: one node, SiLU as torch exports it (Sigmoid, then Mul with x), or GELU
    as older exporters write it (x / sqrt 2, Erf, + 1, * x, * 0.5: activation 8 once fused)."""
    if act == "SiLU":
        return [helper.make_node("Sigmoid", [x], [y + "_sig"]), helper.make_node("Mul", [y + "_sig", x], [y])]
    if act == "GeluErf":
        c = [helper.make_node("Constant", [], [y + k], value=numpy_helper.from_array(np.float32(v), y + k))
             for k, v in (("_r2", np.sqrt(2.0)), ("_one", 1.0), ("_half", 0.5))]
        return c + [helper.make_node("Div", [x, y + "_r2"], [y + "_d"]), helper.make_node("Erf", [y + "_d"], [y + "_e"]),
                    helper.make_node("Add", [y + "_e", y + "_one"], [y + "_p"]),
                    helper.make_node("Mul", [x, y + "_p"], [y + "_m"]), helper.make_node("Mul", [y + "_m", y + "_half"], [y])]
    return [helper.make_node(act, [x], [y], **attrs)]


def _chain(act: str, attrs: dict) -> object:
    """x[1,16,9,9] -> winograd conv (+x) -> act -> depthwise -> act -> 1x1 conv -> act -> 5x5 conv -> act
    -> Flatten -> Gemm -> act: one head of each kind, every one followed by the activation."""
    rng = np.random.default_rng(3)
    c, hw = 16, 9

    def w(name: str, *shape: int) -> object:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    inits = [w("w3", c, c, 3, 3), w("b3", c), w("wd", c, 1, 3, 3), w("bd", c), w("w1", c, c, 1, 1), w("b1", c),
             w("w5", 4, c, 5, 5), w("b5", 4), w("wg", 4 * hw * hw, 10), w("bg", 10)]
    nodes = [helper.make_node("Conv", ["x", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c3", "x"], ["s3"]),
             *_act(act, attrs, "s3", "a3"),
             helper.make_node("Conv", ["a3", "wd", "bd"], ["cd"], pads=[1, 1, 1, 1], group=c),
             *_act(act, attrs, "cd", "ad"),
             helper.make_node("Conv", ["ad", "w1", "b1"], ["c1"]),
             *_act(act, attrs, "c1", "a1"),
             helper.make_node("Conv", ["a1", "w5", "b5"], ["c5"], pads=[2, 2, 2, 2]),
             *_act(act, attrs, "c5", "a5"),
             helper.make_node("Flatten", ["a5"], ["f"]),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["g"]),
             *_act(act, attrs, "g", "y")]
    return make_model(nodes, [f32("x", [1, c, hw, hw])], [f32("y", [1, 10])], inits, opset=20)


def _atol(want: np.ndarray) -> float:
    """1e-5 of the outputs' scale: five layers of 16-400-term sums round relative to their largest terms, not
    to each output (onnxruntime's AVX-512 kernels and ours differ by ~3e-5 on a 2.03 beside a 33.7)."""
    return 1e-5 * max(1.0, float(np.abs(want).max()))


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("act,attrs", ACTIVATIONS, ids=[f"{a}{'_' + '_'.join(map(str, k.values())) if k else ''}"
                                                         for a, k in ACTIVATIONS])
def test_activation_fuses_into_every_head(act: str, attrs: dict, tile: int, tmp_path, monkeypatch) -> None:
    import packager.ops.conv as conv
    if tile == 4:   # the 16-channel 9x9 layer as Winograd F(4x4)
        monkeypatch.setattr(conv, "WINOGRAD_F4_MIN_TILES", 1)
        monkeypatch.setattr(conv, "WINOGRAD_F4_MIN_CHANNEL_PAIRS", 1)
    model = _chain(act, attrs)
    path = package(model, out=tmp_path / "b", verify=False)
    plan = layout.decode((path / "model.plan").read_bytes())
    kernels = [Op(n.op).name for n in plan.nodes]
    assert "UNARY" not in kernels and "BINARY" not in kernels, kernels   # every activation went into an epilogue
    wino = "WINOGRAD_CONV_F4" if tile == 4 else "WINOGRAD_CONV"
    assert {wino, "DEPTHWISE_CONV", "CONV", "GEMM"} <= set(kernels), kernels
    for variant in ("simd", "scalar"):
        b = load_bundle(path, variant)
        feeds = random_inputs(b.inputs, seed=5)
        got, want = b.run(feeds)["y"], reference_run(model, feeds)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=_atol(want), err_msg=f"{act} [{variant}]")


def test_fused_activations_clean_under_asan(tmp_path) -> None:
    """The same bundles through the ASan + UBSan host build of edgepack-run (the out-of-line activation path
    reads and writes only the tile it was given)."""
    from .conformance import runner_asan
    cli = runner_asan.build_cli()
    for i, (act, attrs) in enumerate(ACTIVATIONS):
        model = _chain(act, attrs)
        path = package(model, out=tmp_path / f"b{i}", verify=False)
        b = Bundle(path)
        feeds = random_inputs(b.inputs, seed=7)
        status, why, got = runner_asan.run_asan_cli(cli, path, feeds, b.outputs, timeout=300)
        assert status == "ok", why
        want = reference_run(model, feeds)["y"]
        np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=_atol(want), err_msg=act)


@pytest.mark.skipif(shutil.which("qemu-aarch64") is None, reason="qemu-user missing")
def test_fused_activations_on_aarch64_under_qemu(tmp_path) -> None:
    """pi5 bundles (NEON 6x16 GEMM + the portable kernels built for aarch64) against onnxruntime."""
    for i, (act, attrs) in enumerate(ACTIVATIONS):
        path = package(_chain(act, attrs), target="pi5", out=tmp_path / f"b{i}")
        v = json.loads((path / "manifest.json").read_text())["verification"]
        assert v["max_abs_diff"] < 1e-4, (act, v)   # FMA on NEON: ~1 ulp of outputs up to ~10
