"""fp16 bundles: weights stored as float16 (about half the bytes), widened once by prologue CAST nodes when
the arena is bound, computed in float32. Run by the real runtimes and compared with float32 onnxruntime."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from packager.api import package
from packager.bundle import load_bundle
from packager.errors import RuntimeFailure
from packager.plan import layout
from packager.plan.opcodes import Op
from packager.quantize.report import measure
from packager.reference import reference_session
from packager.quantize.calib_data import CalibrationSet
from packager.runtime.wasm import WasmPlan
from packager.toolchain import ensure_wasm

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / ".cache" / "models"
# float16 keeps 11 significant bits: outputs within 1e-3 of the float32 model's scale, cosine >= 0.9999
REL_TOL, MIN_COS = 1e-3, 0.9999


def _plan(bundle: Path) -> layout.Plan:
    return layout.decode((bundle / "model.plan").read_bytes())


@pytest.mark.parametrize("model", ["cifar10net", "mobilenetv2", "minilm_like"])
def test_fp16_bundle_runs_and_halves_weights(model, tmp_path):
    import onnx
    fp32 = package(MODELS / f"{model}.onnx", "web", tmp_path / "fp32", quantize="none", verify=False, dynamic=False, emit_onnx=True)
    fp16 = package(MODELS / f"{model}.onnx", "web", tmp_path / "fp16", quantize="fp16", dynamic=False, emit_onnx=True)
    m32, m16 = (json.loads((p / "manifest.json").read_text()) for p in (fp32, fp16))
    ratio = m16["plan"]["weights_bytes"] / m32["plan"]["weights_bytes"]
    assert 0.49 <= ratio <= 0.52, ratio
    onnx_ratio = m16["files"]["model.onnx"]["bytes"] / m32["files"]["model.onnx"]["bytes"]
    assert onnx_ratio <= 0.52, onnx_ratio
    assert m16["precision"]["fp16"] is True and m16["precision"]["mode"] == "fp16"
    assert m32["precision"]["fp16"] is False
    # prologue CASTs (and WINOGRAD_FILTERs, which widen their float16 taps themselves): a prefix of the plan,
    # float16 weights in, float32 arena tensors out
    plan = _plan(fp16)
    pro = [n for n in plan.nodes if n.flags & layout.NODE_PROLOGUE]
    assert pro and plan.nodes[:len(pro)] == pro
    for n in pro:
        assert n.op in (Op.CAST, Op.WINOGRAD_FILTER)
        assert plan.tensors[n.inputs[0]].dtype == 10 and plan.tensors[n.inputs[0]].storage == layout.WEIGHTS
        assert plan.tensors[n.outputs[0]].dtype == 1 and plan.tensors[n.outputs[0]].storage == layout.ARENA
    # the accuracy report: the bundle (its wasm, wasmtime) vs float32 onnxruntime
    acc = m16["accuracy"]
    assert acc["precision"] == "fp16" and "wasmtime" in acc["runtime"]
    assert (fp16 / "accuracy.md").is_file() and "accuracy.md" in m16["files"]
    b = load_bundle(fp16)   # checks every listed file's SHA-256, accuracy.md included
    ref = reference_session(onnx.load(MODELS / f"{model}.onnx"))
    from packager.reference import random_inputs
    feeds = [random_inputs(b.inputs, seed=s) for s in (11, 12, 13)]
    data = CalibrationSet({i["name"]: np.stack([f[i["name"]] for f in feeds]) for i in b.inputs}, None, "random")
    out = measure(b.run, ref, data)
    for name, o in out.items():
        scale = max(float(np.abs(ref(feeds[0])[name]).max()), 1e-6)
        assert o["max_abs_error"] <= REL_TOL * scale, (name, o, scale)
        assert o["cosine_min"] >= MIN_COS, o
    # the same bundle again, several runs: the prologue ran once, its outputs survive every run
    again = measure(b.run, ref, data)
    assert again == out


def test_fp16_edge_bundle_consistent(tmp_path):
    path = package(MODELS / "cifar10net.onnx", "pi5", tmp_path / "pi5", quantize="fp16", dynamic=False)
    m = json.loads((path / "manifest.json").read_text())
    c = m["consistency"]
    assert c["onnxruntime_vs_wasm"]["max_abs_diff"] < 1e-4
    if "onnxruntime_vs_neon" in c:      # qemu-aarch64 present: the NEON build ran the prologue too
        assert c["onnxruntime_vs_neon"]["max_abs_diff"] < 1e-4
    assert m["accuracy"]["precision"] == "fp16"


def _cast_plan(n: int, src: int, dst: int) -> bytes:
    size = {1: 4, 10: 2}
    a, b = n * size[src], n * size[dst]
    off_b = (a + 63) // 64 * 64
    t = [layout.TensorEntry(src, layout.ARENA, 0, a, (n,)), layout.TensorEntry(dst, layout.ARENA, off_b, b, (n,))]
    return layout.encode(layout.Plan(t, [layout.NodeEntry(int(Op.CAST), [0], [1], [])], [0], [1], b"",
                                     (off_b + b + 63) // 64 * 64))


def _cast(x: np.ndarray, dst: np.dtype) -> np.ndarray:
    src = {np.float32: 1, np.float16: 10}
    w = WasmPlan(ensure_wasm()["edgepack.wasm"], _cast_plan(x.size, src[x.dtype.type], src[np.dtype(dst).type]))
    w.write(0, x)
    w.run()
    return w.read(1, np.dtype(dst), x.shape)


def test_cast_f16_to_f32_exact_for_every_half():
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got, want = _cast(h, np.float32), h.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))   # bits: signed zeros, subnormals


def test_cast_f32_to_f16_rounds_to_nearest_even():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.standard_normal(20000).astype(np.float32) * np.float32(10.0) ** rng.integers(-9, 6, 20000),
        np.array([0.0, -0.0, np.inf, -np.inf, 65504, 65519.99, 65520, 1e6, 6.1e-5, 5.96e-8, 2.98e-8, 2.99e-8,
                  1e-10, -3e-6, 1 + 2 ** -11, 1 + 3 * 2 ** -11], np.float32),
        # exact ties between two halves, normal and subnormal
        (np.arange(1, 2000, dtype=np.float32) + 0.5) * np.float32(2 ** -24),
        (np.arange(1024, 2048, dtype=np.float32) + 0.5) * np.float32(2 ** -10)]).astype(np.float32)
    got = _cast(x, np.float16)
    with np.errstate(over="ignore"):   # numpy warns on the values that overflow to inf, as intended
        want = x.astype(np.float16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def _patch_node_word(plan: bytes, node: int, offset: int, value: int) -> bytes:
    hdr = struct.unpack_from("<4s15I", plan, 0)
    b = bytearray(plan)
    struct.pack_into("<I", b, hdr[10] + node * layout.NODE_BYTES + offset, value)
    return bytes(b)


def test_runtime_checks_node_flags(tmp_path):
    path = package(MODELS / "cifar10net.onnx", "web", tmp_path / "b", quantize="fp16", verify=False, dynamic=False)
    plan = (path / "model.plan").read_bytes()
    wasm = ensure_wasm()["edgepack.wasm"]
    WasmPlan(wasm, plan)                                           # as packaged: accepted
    for bad, why in [(_patch_node_word(plan, 0, 24, 2), "unknown flag bit"),
                     (_patch_node_word(plan, 0, 28, 1), "reserved word"),
                     (_patch_node_word(_patch_node_word(plan, 0, 24, 0), 1, 24, 1), "prologue after a run node")]:
        with pytest.raises(RuntimeFailure, match="op"):
            WasmPlan(wasm, bad)
    # a prologue node that reads an arena tensor (not a weight) is refused
    p = layout.decode(plan)
    last = len(p.nodes) - 1
    p.nodes[last].flags = layout.NODE_PROLOGUE
    p.nodes.insert(0, p.nodes.pop(last))
    with pytest.raises(RuntimeFailure):
        WasmPlan(wasm, layout.encode(p))


def test_fp16_bundle_in_node(tmp_path):
    """The web runtime (web/src, under Node) binds the arena once: the prologue runs there too."""
    from tests.test_web_node import _node_major, _node_run, _outputs
    if _node_major() < 20:
        pytest.skip("needs Node >= 20")
    from packager.reference import random_inputs
    path = package(MODELS / "cifar10net.onnx", "web", tmp_path / "b", quantize="fp16", verify=False, dynamic=False)
    b = load_bundle(path)
    feeds = random_inputs(b.inputs, seed=3)
    got = _outputs(_node_run(tmp_path / "node", path, feeds, repeat=3))
    want = b.run(feeds)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)


def test_onnx_cast_float16_round_trip(tmp_path):
    """ONNX Cast float32 -> float16 -> float32 lowers to the CAST kernel and matches onnxruntime bit for bit."""
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
                           helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT)], "cast16",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 1000])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1000])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    b = load_bundle(package(m, "web", tmp_path / "b", quantize="none", verify=False))
    x = (np.random.default_rng(0).standard_normal((4, 1000)) * 10.0 ** np.arange(-6, 6, 3)[:, None]).astype(np.float32)
    got = b.run({"x": x})["y"]
    assert np.array_equal(got, reference_session(m)({"x": x})["y"])
    assert np.array_equal(got, x.astype(np.float16).astype(np.float32))
