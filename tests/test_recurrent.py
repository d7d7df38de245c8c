"""RNN, GRU, LSTM and com.microsoft.DynamicQuantizeLSTM against onnxruntime through package -> bundle -> wasm:
directions, layouts, activations with alpha/beta, clip, initial states, sequence_lens, peepholes, input_forget,
linear_before_reset, optional outputs; a run-time sequence length; onnxruntime's quantize_dynamic LSTM."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager import load_bundle, package
from packager.errors import PackagerError

from .conftest import PORTABLE_AND_VECTOR, VARIANTS

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def build(op: str, s: int = 5, b: int = 3, i: int = 4, h: int = 6, direction: str = "forward", layout: int = 0,
          opset: int = 22, bias: bool = True, seq_lens: bool = False, h0: bool = False, c0: bool = False,
          peep: bool = False, outputs: tuple[bool, ...] = (True, True, True), seed: int = 0,
          **attrs) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One recurrent node; W, R, B, P constants; X, sequence_lens, initial_h, initial_c graph inputs."""
    rng = np.random.default_rng(seed)
    nd, g = (2 if direction == "bidirectional" else 1), GATES[op]
    f32 = lambda *shape: (rng.standard_normal(shape) * 0.5).astype(np.float32)  # noqa: E731
    inits = {"W": f32(nd, g * h, i), "R": f32(nd, g * h, h)}
    xs = (b, s, i) if layout else (s, b, i)
    hs = (b, nd, h) if layout else (nd, b, h)
    feeds = {"X": f32(*xs)}
    ins = ["X", "W", "R", "", "", "", "", ""]
    if bias:
        inits["B"] = f32(nd, 2 * g * h)
        ins[3] = "B"
    if seq_lens:
        feeds["sl"] = rng.integers(1, s + 1, size=b).astype(np.int32)
        feeds["sl"][0] = s
        ins[4] = "sl"
    if h0:
        feeds["h0"] = f32(*hs)
        ins[5] = "h0"
    if c0:
        feeds["c0"] = f32(*hs)
        ins[6] = "c0"
    if peep:
        inits["P"] = f32(nd, 3 * h)
        ins[7] = "P"
    ins = ins[:3 + max([k for k in range(5) if ins[3 + k]], default=-1) + 1]
    n_out = 3 if op == "LSTM" else 2
    outs = [name if outputs[k] else "" for k, name in enumerate(["Y", "Y_h", "Y_c"][:n_out])]
    while outs and not outs[-1]:
        outs.pop()
    if layout:
        attrs["layout"] = 1
    node = helper.make_node(op, ins, outs, hidden_size=h, direction=direction, **attrs)
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, xs)]
    if seq_lens:
        inputs.append(helper.make_tensor_value_info("sl", TensorProto.INT32, (b,)))
    inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, hs) for n in ("h0", "c0") if n in feeds]
    graph = helper.make_graph([node], "rnn", inputs, [helper.make_empty_tensor_value_info(o) for o in outs if o],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    m = onnx.shape_inference.infer_shapes(m)
    return m, feeds


def ort(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime's outputs; for layout 1, which it refuses, those of the layout-0 twin, transposed."""
    import onnxruntime as rt
    node = m.graph.node[0]
    lay = next((a.i for a in node.attribute if a.name == "layout"), 0)
    if lay:
        m = onnx.ModelProto.FromString(m.SerializeToString())
        node = m.graph.node[0]
        node.attribute.remove(next(a for a in node.attribute if a.name == "layout"))
        for vi in m.graph.input:
            vi.type.tensor_type.ClearField("shape")
        names = [o.name for o in m.graph.output]
        del m.graph.output[:], m.graph.value_info[:]
        m.graph.output.extend(helper.make_empty_tensor_value_info(o) for o in names)
        feeds = {k: v.transpose(1, 0, 2) if v.ndim == 3 else v for k, v in feeds.items()}
    s = rt.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    out = dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))
    if lay:   # Y [S, D, B, H] -> [B, S, D, H]; Y_h, Y_c [D, B, H] -> [B, D, H]
        out = {k: v.transpose(2, 0, 1, 3) if v.ndim == 4 else v.transpose(1, 0, 2) for k, v in out.items()}
    return out


def compare(m: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp: Path, variants: tuple[str, ...] = ("simd",),
            tol: float = 1e-4, **kw) -> Path:
    want = ort(m, feeds)
    out = package(m, out=tmp / "b", verify=False, **kw)
    for v in variants:
        got = load_bundle(out, v).run(feeds)
        for k, w in want.items():
            assert got[k].shape == w.shape, (k, got[k].shape, w.shape)
            np.testing.assert_allclose(got[k], w, rtol=tol, atol=tol, err_msg=f"{k} ({v})")
    return out


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions(tmp_path: Path, op: str, direction: str) -> None:
    m, feeds = build(op, direction=direction, h0=True, c0=op == "LSTM", seed=hash((op, direction)) % 1000)
    compare(m, feeds, tmp_path, VARIANTS)


CASES = {
    "lstm_layout1_bidir_all_inputs": ("LSTM", dict(direction="bidirectional", layout=1, seq_lens=True, h0=True, c0=True,
                                                   peep=True)),
    "lstm_input_forget_peep_clip": ("LSTM", dict(input_forget=1, peep=True, clip=0.7, h0=True, c0=True)),
    "lstm_scaledtanh_affine_hardsigmoid": ("LSTM", dict(activations=["HardSigmoid", "ScaledTanh", "Affine"],
                                                        activation_alpha=[0.3, 1.2, 0.8], activation_beta=[0.4, 0.7, 0.1])),
    "lstm_bidir_six_activations": ("LSTM", dict(direction="bidirectional", activations=[
        "LeakyRelu", "Elu", "Softsign", "ThresholdedRelu", "Softplus", "Tanh"], activation_alpha=[0.2, 0.9, 0.1])),
    "lstm_activation_defaults": ("LSTM", dict(activations=["HardSigmoid", "LeakyRelu", "Elu"])),
    "lstm_only_y_h_opset7": ("LSTM", dict(opset=7, outputs=(False, True, False))),
    "lstm_only_y_c_batch7_reverse_seq": ("LSTM", dict(b=7, direction="reverse", seq_lens=True,
                                                      outputs=(False, False, True))),
    "lstm_no_bias_batch1": ("LSTM", dict(b=1, bias=False, s=9)),
    "gru_lbr_bidir_seq_h0": ("GRU", dict(linear_before_reset=1, direction="bidirectional", seq_lens=True, h0=True)),
    "gru_lbr_no_bias": ("GRU", dict(linear_before_reset=1, bias=False)),
    "gru_relu_clip_batch7": ("GRU", dict(activations=["Sigmoid", "Relu"], clip=1.1, b=7, h0=True)),
    "gru_layout1_reverse_only_y": ("GRU", dict(layout=1, direction="reverse", seq_lens=True, outputs=(True, False))),
    "gru_opset7_hardsigmoid": ("GRU", dict(opset=7, activations=["HardSigmoid", "Softsign"], activation_alpha=[0.25],
                                           activation_beta=[0.45])),
    "rnn_relu_clip_reverse_seq": ("RNN", dict(activations=["Relu"], clip=0.9, direction="reverse", seq_lens=True)),
    "rnn_bidir_affine_scaledtanh_layout1": ("RNN", dict(direction="bidirectional", layout=1, h0=True,
                                                        activations=["Affine", "ScaledTanh"], activation_alpha=[0.6, 1.5],
                                                        activation_beta=[0.2, 0.5])),
    "lstm_bidir_hardsigmoid_leakyrelu_opset14": ("LSTM", dict(direction="bidirectional", b=4, opset=14, activations=[
        "HardSigmoid", "Softsign", "LeakyRelu", "Sigmoid", "Tanh", "LeakyRelu"], activation_alpha=[0.3, 0.05],
        activation_beta=[0.45])),
}


@pytest.mark.parametrize("name", list(CASES))
def test_attribute_matrix(tmp_path: Path, name: str) -> None:
    op, kw = CASES[name]
    m, feeds = build(op, seed=sum(map(ord, name)), **kw)
    compare(m, feeds, tmp_path, PORTABLE_AND_VECTOR if "bidir" in name or "batch7" in name else ("simd",))


def test_runtime_sequence_length(tmp_path: Path) -> None:
    """One bundle (plan v2) with a symbolic sequence length and batch, run at two of each."""
    m, feeds = build("LSTM", s=4, b=2, h0=True, c0=True, peep=True, direction="bidirectional")
    for vi in m.graph.input:
        dims = vi.type.tensor_type.shape.dim
        if vi.name == "X":
            dims[0].dim_param, dims[1].dim_param = "seq", "batch"
        else:
            dims[1].dim_param = "batch"
    del m.graph.value_info[:]
    names = [o.name for o in m.graph.output]
    del m.graph.output[:]
    m.graph.output.extend(helper.make_empty_tensor_value_info(o) for o in names)
    m = onnx.shape_inference.infer_shapes(m)
    out = package(m, out=tmp_path / "b", verify=False, dynamic=True)
    assert __import__("json").loads((out / "manifest.json").read_text())["plan"]["version"] == 2
    bundle = load_bundle(out, "simd")
    rng = np.random.default_rng(7)
    for s, b in ((3, 2), (11, 5), (1, 1)):
        f = {"X": rng.standard_normal((s, b, 4)).astype(np.float32),
             "h0": rng.standard_normal((2, b, 6)).astype(np.float32), "c0": rng.standard_normal((2, b, 6)).astype(np.float32)}
        want, got = ort(m, f), bundle.run(f)
        for k, w in want.items():
            np.testing.assert_allclose(got[k], w, rtol=1e-4, atol=1e-4, err_msg=f"{k} at S={s}, B={b}")


@pytest.mark.parametrize("kw, why", [
    (dict(activations=["Sigmoid", "Gelu"]), "activation 'Gelu' is not one of"),
    (dict(activations=["Sigmoid", "Tanh"], direction="bidirectional"), "2 activations given, GRU takes 2 per direction"),
    (dict(clip=-1.0), "clip -1.0 must be positive"),
])
def test_bad_attributes_refused(tmp_path: Path, kw: dict, why: str) -> None:
    m, _ = build("GRU", **kw)
    with pytest.raises(PackagerError, match=rf"GRU \(node '.*', opset 22\).*{why}"):
        package(m, out=tmp_path / "b", verify=False)


def test_quantize_dynamic_lstm(tmp_path: Path) -> None:
    """onnxruntime.quantization.quantize_dynamic writes com.microsoft.DynamicQuantizeLSTM for an LSTM."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    m, feeds = build("LSTM", s=6, b=2, i=16, h=32, direction="bidirectional", h0=True, c0=True, opset=17)
    src, dst = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(m, src)
    quantize_dynamic(src, dst, weight_type=QuantType.QInt8, op_types_to_quantize=["LSTM"])
    q = onnx.load(dst)
    assert [n.op_type for n in q.graph.node] == ["DynamicQuantizeLSTM"]
    want = ort(q, feeds)
    got = load_bundle(package(q, out=tmp_path / "b", verify=False), "simd").run(feeds)
    # onnxruntime also quantizes X and H to 8 bits per step: compare at the scale of its own float-vs-int8 error
    ref = ort(m, feeds)
    for k, w in want.items():
        scale = float(np.abs(ref[k]).max())
        ort_err = float(np.abs(w - ref[k]).max())
        err = float(np.abs(got[k] - w).max())
        assert err <= max(2 * ort_err, 1e-3 * scale), (k, err, ort_err)


needs_aarch64 = pytest.mark.skipif(__import__("shutil").which("qemu-aarch64") is None or
                                   __import__("shutil").which("aarch64-linux-gnu-gcc") is None,
                                   reason="qemu-user / gcc-aarch64-linux-gnu missing")


@needs_aarch64
@pytest.mark.parametrize("op, kw", [
    ("LSTM", dict(direction="bidirectional", b=7, seq_lens=True, h0=True, c0=True, peep=True)),
    ("GRU", dict(linear_before_reset=1, direction="reverse", b=2, h0=True)),
    ("GRU", dict(b=4, activations=["HardSigmoid", "Softsign"], clip=0.8)),
])
def test_pi5_under_qemu(tmp_path: Path, op: str, kw: dict) -> None:
    """The aarch64 build (NEON GEMM micro-kernel, edgepack-run) under qemu-aarch64."""
    from packager.targets import edge as E
    m, feeds = build(op, **kw)
    out = package(m, target="pi5", out=tmp_path / "b", verify=False)
    outs = __import__("json").loads((out / "manifest.json").read_text())["outputs"]
    got = E.run_cli(out, feeds, outs, qemu=E.qemu_cmd("pi5"))
    for k, w in ort(m, feeds).items():
        np.testing.assert_allclose(got[k], w, rtol=1e-4, atol=1e-4, err_msg=f"{k} [pi5 under qemu]")


def test_onnx_conformance_cases() -> None:
    """The ONNX backend node cases of LSTM, GRU and RNN (tests/conformance/runner.py), SIMD and scalar builds."""
    from .conformance.runner import run_all
    for variant in PORTABLE_AND_VECTOR:
        results = run_all({"LSTM", "GRU", "RNN"}, variant=variant)
        assert len(results) >= 18
        bad = [(r["case"], r["status"], r["why"]) for r in results if r["status"] != "pass"]
        assert not bad, (variant, bad)


def test_hostile_words_and_shapes_refused(tmp_path: Path) -> None:
    """Parameter words, inputs and scratch that disagree with the tensors are refused when the plan opens."""
    from packager.errors import RuntimeFailure
    from packager.plan import layout
    from packager.plan.opcodes import Op
    from packager.runtime.wasm import WasmPlan
    from packager.toolchain import ensure_wasm

    m, _ = build("LSTM", direction="bidirectional", peep=True, seq_lens=True, h0=True, c0=True)
    out = package(m, out=tmp_path / "b", verify=False)
    good = (out / "model.plan").read_bytes()
    wasm = ensure_wasm()["edgepack.wasm"]
    WasmPlan(wasm, good)

    def node_of(p: layout.Plan) -> layout.NodeEntry:
        return next(n for n in p.nodes if n.op == Op.RECURRENT)

    mutations = [
        lambda n: n.params.__setitem__(0, 3),            # kind
        lambda n: n.params.__setitem__(0, 1),            # GRU: word count and gates disagree
        lambda n: n.params.__setitem__(1, 0),            # one direction for two
        lambda n: n.params.__setitem__(2, 7),            # hidden size
        lambda n: n.params.__setitem__(3, 2),            # layout
        lambda n: n.params.__setitem__(4, layout.f32_bits(-1.0)),   # clip
        lambda n: n.params.__setitem__(5, 1),            # linear_before_reset on an LSTM
        lambda n: n.params.__setitem__(7, 31),           # NOT is no float function
        lambda n: n.params.__setitem__(7, 32),           # ISNAN gives bools: not a gate activation
        lambda n: n.params.__setitem__(7, 34),           # TAN: a UNARY code the gates do not compute
        lambda n: n.params.__setitem__(7, 99),
        lambda n: n.params.pop(),
        lambda n: setattr(n, "scratch_bytes", 16),
        lambda n: n.inputs.__setitem__(6, n.inputs[0]),  # XW as P: wrong size
        lambda n: n.inputs.__setitem__(3, n.inputs[4]),  # a float tensor as sequence_lens
    ]
    for k, mutate in enumerate(mutations):
        p = layout.decode(good)
        mutate(node_of(p))
        with pytest.raises(RuntimeFailure):
            WasmPlan(wasm, layout.encode(p))
            pytest.fail(f"mutation {k} accepted")


@pytest.mark.skipif(__import__("shutil").which("node") is None, reason="needs Node")
@pytest.mark.parametrize("variant, options", [("simd", {}), ("relaxed", {}), ("auto", {"threads": 2})])
def test_node_runtime(tmp_path: Path, variant: str, options: dict) -> None:
    """The web runtime (web/src) under Node, the threaded build too: a bidirectional LSTM with every input."""
    from .test_web_node import RELAXED_FLAG, _node_major, _node_run, _outputs
    if _node_major() < 20:
        pytest.skip("needs Node >= 20")
    m, feeds = build("LSTM", direction="bidirectional", b=4, seq_lens=True, h0=True, c0=True, peep=True)
    out = package(m, out=tmp_path / "b", verify=False)
    flags = (RELAXED_FLAG,) if variant != "simd" else ()
    res = _node_run(tmp_path / "n", out, feeds, variant, options=options, node_flags=flags)
    got = _outputs(res)
    assert res["variant"].startswith("threads") if options else res["variant"] == variant
    for k, w in ort(m, feeds).items():
        np.testing.assert_allclose(got[k], w, rtol=1e-4, atol=1e-4, err_msg=f"{k} [{res['variant']}]")
