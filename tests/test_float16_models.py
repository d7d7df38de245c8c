"""float16 models as users bring them (torch `.half()` exports: float16 weights, float16 inputs and outputs), packaged
by the CLI, computed in float32 (packager/passes/float16.py) and run in Node, against onnxruntime's float16 answer.

Tolerance: onnxruntime may round intermediates to float16 (10-bit mantissa, relative step 2^-10 ~ 1e-3), we round
only the inputs, the weights and the outputs, so the two differ by float16's rounding accumulated over the layers:
a few float16 steps of the output's magnitude. TOL_STEPS float16 steps of max |output| bounds it with margin
(measured: 0 steps on the CNN, at most 1.6 on the BERT, docs/conformance.md); a wrong weight, mask or epilogue
moves the outputs by far more."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from packager.cli import main as cli
from packager.plan import layout
from packager.plan.opcodes import Op
from packager.reference import reference_run
from packager.targets.edge import qemu_available
from tests.test_attention_masks import _Hidden
from tests.test_web_node import _node_major, _node_run, _outputs

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(_node_major() < 20, reason="needs Node >= 20")

TOL_STEPS = 8
F16_STEP = 2.0 ** -10


class _Cnn(torch.nn.Module):
    """Conv + BatchNorm + Relu, depthwise + HardSwish, 1x1, MaxPool, global mean, Linear, Softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.bn = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
        self.c2, self.c3 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8), torch.nn.Conv2d(8, 16, 1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.c1(x)))
        x = torch.nn.functional.max_pool2d(self.c3(torch.nn.functional.hardswish(self.c2(x))), 2)
        return torch.softmax(self.fc(x.mean((2, 3))), -1)


def _export(model: torch.nn.Module, args: tuple, names: list[str], out: str, path: Path) -> Path:
    torch.onnx.export(model.eval().half(), args, str(path), input_names=names, output_names=[out], opset_version=17,
                      dynamo=False)
    return path


def _cnn(tmp: Path) -> Path:
    torch.manual_seed(0)
    m = _Cnn()
    with torch.no_grad():
        for p in m.bn.parameters():   # a BatchNorm that does something
            p.uniform_(0.5, 1.5)
        m.bn.running_mean.uniform_(-0.2, 0.2)
    return _export(m, (torch.randn(1, 3, 16, 16).half(),), ["x"], "y", tmp / "cnn16.onnx")


def _bert(tmp: Path) -> Path:
    from bench.models.zoo import _transformers   # imports transformers the way a CPU-only torch allows
    torch.manual_seed(0)
    cfg = _transformers().BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64, attn_implementation="eager")
    bert = _transformers().BertModel(cfg, add_pooling_layer=False)
    args = (torch.randint(0, 100, (2, 8)), torch.ones(2, 8, dtype=torch.int64))
    return _export(_Hidden(bert), args, ["input_ids", "attention_mask"], "hidden", tmp / "bert16.onnx")


def _package(onnx_path: Path, out: Path, *args: str) -> Path:
    assert cli([str(onnx_path), "-o", str(out), *(args or ("--target", "web"))]) == 0
    return out


def _check(tmp: Path, onnx_path: Path, bundle: Path, feeds: dict[str, np.ndarray]) -> list[Op]:
    """Checks the bundle's answer and plan; returns the kernels that run (prologue left out)."""
    model = onnx.load(onnx_path)
    assert all(t.data_type == onnx.TensorProto.FLOAT16 for t in model.graph.initializer if len(t.dims) > 1)
    want = reference_run(model, feeds)
    res = _node_run(tmp / "node", bundle, feeds, variant="relaxed", node_flags=("--experimental-wasm-relaxed-simd",),
                    ctor={k: "Uint16Array" if v.dtype == np.float16 else None for k, v in feeds.items()})
    got = _outputs(res)
    for k, w in want.items():
        assert w.dtype == np.float16 and got[k].dtype == np.float16, (k, got[k].dtype)
        tol = TOL_STEPS * F16_STEP * float(np.abs(w.astype(np.float32)).max())
        np.testing.assert_allclose(got[k].astype(np.float32), w.astype(np.float32), rtol=0, atol=tol, err_msg=k)
    plan = layout.decode((bundle / "model.plan").read_bytes())
    weights16 = [t for t in plan.tensors if t.dtype == onnx.TensorProto.FLOAT16 and t.storage == layout.WEIGHTS]
    assert weights16, "the float16 weights ship as float16 (half the download of float32)"
    runs = [Op(n.op) for n in plan.nodes if not n.flags & layout.NODE_PROLOGUE]   # prologue: the weights, once
    # the model's own Casts (an int64 mask to float16), a Cast to float16 then one back to float32
    own = sum(2 if n.attribute[0].i == onnx.TensorProto.FLOAT16 else 1
              for n in model.graph.node if n.op_type == "Cast")
    edges = sum(v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16 for v in [*model.graph.input,
                                                                                   *model.graph.output])
    assert runs.count(Op.CAST) == own + edges, f"a CAST at each float16 edge, none between kernels: {runs}"
    return runs


@pytest.fixture(scope="module")
def cnn16(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _cnn(tmp_path_factory.mktemp("cnn16"))


def test_float16_cnn(tmp_path: Path, cnn16: Path) -> None:
    bundle = _package(cnn16, tmp_path / "cnn16")
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float16)
    _check(tmp_path, cnn16, bundle, {"x": x})


def test_float16_transformer(tmp_path: Path) -> None:
    onnx_path = _bert(tmp_path)
    bundle = _package(onnx_path, tmp_path / "bert16")
    rng = np.random.default_rng(2)
    mask = np.ones((2, 8), np.int64)
    mask[1, 5:] = 0   # padded keys: the float16 mask arithmetic ((1 - mask) * lowest) must stay finite
    runs = _check(tmp_path, onnx_path, bundle, {"input_ids": rng.integers(0, 100, (2, 8)).astype(np.int64),
                                                "attention_mask": mask})
    # GELU's Erf chain (its sqrt(2) written as float16's 1.4140625) fuses into the FFN MatMul: no Erf UNARY and none
    # of its 4 BINARY per layer (62 -> 52 kernels); the 4 BINARY left are the mask's arithmetic and the embeddings'.
    assert Op.UNARY not in runs and runs.count(Op.BINARY) == 4, runs


@pytest.mark.skipif(not qemu_available(), reason="needs qemu-aarch64")
def test_float16_cnn_pi5(tmp_path: Path, cnn16: Path) -> None:
    """The same plan on the Pi 5 build under qemu: its consistency report against onnxruntime's float16 answer."""
    bundle = _package(cnn16, tmp_path / "pi5", "--target", "pi5")
    c = json.loads((bundle / "manifest.json").read_text())["consistency"]
    for pair in ("onnxruntime_vs_neon", "wasm_vs_neon"):
        assert c[pair]["finite_values"] > 0 and c[pair]["max_abs_diff"] <= TOL_STEPS * F16_STEP, (pair, c[pair])


def test_mixed_model_keeps_float32_weights_and_float16_rounding(tmp_path: Path) -> None:
    """float16 in and out around a float32 MatMul whose weight was kept float32 (onnxconverter_common's block list,
    keep_io_types): that weight ships float32, and the model's Cast to float16 still rounds (bit-identical)."""
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.random.default_rng(3).standard_normal((16, 16)).astype(np.float32) * 100, "w")
    g = helper.make_graph([helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
                           helper.make_node("MatMul", ["xf", "w"], ["p"]),
                           helper.make_node("Cast", ["p"], ["y"], to=TensorProto.FLOAT16)], "mixed",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [4, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [4, 16])], [w])
    path = tmp_path / "mixed.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    bundle = _package(path, tmp_path / "b")
    plan = layout.decode((bundle / "model.plan").read_bytes())
    assert [t.dtype for t in plan.tensors if t.storage == layout.WEIGHTS] == [onnx.TensorProto.FLOAT]
    x = np.random.default_rng(4).standard_normal((4, 16)).astype(np.float16)
    got = _outputs(_node_run(tmp_path / "node", bundle, {"x": x}, variant="simd", ctor={"x": "Uint16Array"}))
    np.testing.assert_array_equal(got["y"], reference_run(onnx.load(path), {"x": x})["y"])
