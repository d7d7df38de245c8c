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
    import onnxruntime as rt
    s = rt.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


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


ALL = ("simd", "scalar", "relaxed")


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions(tmp_path: Path, op: str, direction: str) -> None:
    m, feeds = build(op, direction=direction, h0=True, c0=op == "LSTM", seed=hash((op, direction)) % 1000)
    compare(m, feeds, tmp_path, ALL)
