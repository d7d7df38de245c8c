"""Masked attention as users export it (packager/passes/fuse_attention.py, ATTENTION's mask input and causal words):
a transformers BertModel with an `attention_mask` graph input fed padding zeros, and GPT-2 prompts (a constant causal
mask; with an attention_mask, causal and padding together as one mask computed at run time). Each is exported by
torch.onnx with dynamic axes, packaged by the CLI at fixed shapes (--input-shape), fuses every attention block and
matches onnxruntime on every wasm build."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from packager import load_bundle
from packager.cli import main as cli
from packager.plan import layout
from packager.plan.opcodes import Op
from packager.reference import reference_run

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

TOL = 1e-4
LAYERS, SEQ = 2, 12


class _Hidden(torch.nn.Module):
    """The model's last hidden state from (input_ids, attention_mask) or input_ids alone."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class _CausalPadded(torch.nn.Module):
    """A decoder fed (input_ids, attention_mask) with the causal and padding masks made into one additive 4-D mask
    by plain tensor ops, as transformers before 4.53 built it (4.57's own mask builder runs under vmap, which
    torch.onnx's tracer cannot export with a padding mask)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        n = input_ids.shape[1]
        keep = torch.ones(n, n, dtype=torch.bool).tril()[None, None] & attention_mask[:, None, None, :].bool()
        mask = torch.zeros(keep.shape).masked_fill(~keep, torch.finfo(torch.float32).min)
        return self.model(input_ids=input_ids, attention_mask=mask).last_hidden_state


def _export(model: torch.nn.Module, path: Path, masked: bool, decoder: bool = False) -> Path:
    torch.manual_seed(0)
    ids = torch.randint(0, 100, (2, SEQ))
    names = ["input_ids", "attention_mask"] if masked else ["input_ids"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    args = (ids, torch.ones(2, SEQ, dtype=torch.int64)) if masked else (ids,)
    wrapped = _CausalPadded(model.eval()) if masked and decoder else _Hidden(model.eval())
    torch.onnx.export(wrapped, args, str(path), input_names=names, output_names=["hidden"],
                      dynamic_axes={**axes, "hidden": {0: "batch", 1: "sequence"}}, opset_version=17, dynamo=False)
    return path


def _transformers():
    from bench.models.zoo import _transformers as tf   # imports torchvision the way a CPU-only torch allows
    return tf()


def _bert() -> torch.nn.Module:
    torch.manual_seed(0)
    transformers = _transformers()
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=LAYERS, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=64, attn_implementation="eager")
    return transformers.BertModel(cfg, add_pooling_layer=False)


def _gpt2() -> torch.nn.Module:
    torch.manual_seed(0)
    transformers = _transformers()
    cfg = transformers.GPT2Config(vocab_size=100, n_positions=64, n_embd=32, n_layer=LAYERS, n_head=4,
                                  attn_implementation="eager")
    return transformers.GPT2Model(cfg)


def _package(onnx_path: Path, out: Path, batch: int, masked: bool) -> Path:
    shapes = [f"input_ids={batch}x{SEQ}", *([f"attention_mask={batch}x{SEQ}"] if masked else [])]
    assert cli([str(onnx_path), "-o", str(out), "--target", "web", *sum((["--input-shape", s] for s in shapes), [])]) == 0
    return out


def _kernels(bundle: Path) -> list[str]:
    return [Op(n.op).name for n in layout.decode((bundle / "model.plan").read_bytes()).nodes]


def _check(onnx_path: Path, bundle: Path, feeds: dict[str, np.ndarray]) -> None:
    kernels = _kernels(bundle)
    assert kernels.count("ATTENTION") == LAYERS and "SOFTMAX" not in kernels, kernels
    want = reference_run(onnx.load(onnx_path), feeds)["hidden"]
    for variant in ("simd", "relaxed", "scalar"):
        got = load_bundle(bundle, variant).run(feeds)["hidden"]
        np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL, err_msg=variant)


def test_bert_padding_mask(tmp_path: Path) -> None:
    # rows: no padding, 5 padded keys, every key padded (the additive lowest everywhere: uniform, as onnxruntime)
    onnx_path = _export(_bert(), tmp_path / "bert.onnx", masked=True)
    bundle = _package(onnx_path, tmp_path / "b", 3, masked=True)
    plan = layout.decode((bundle / "model.plan").read_bytes())
    att = [n for n in plan.nodes if n.op == Op.ATTENTION]
    assert all(len(n.inputs) == 4 and tuple(plan.tensors[n.inputs[3]].dims) == (3, 1, 1, SEQ) for n in att), \
        "the padding mask is read at its own [B, 1, 1, Lk] size"
    mask = np.ones((3, SEQ), np.int64)
    mask[1, -5:] = 0
    mask[2] = 0
    feeds = {"input_ids": np.random.default_rng(1).integers(0, 100, (3, SEQ)).astype(np.int64), "attention_mask": mask}
    _check(onnx_path, bundle, feeds)


@pytest.mark.parametrize("masked", [False, True])
def test_gpt2_causal_prompt(masked: bool, tmp_path: Path) -> None:
    # unmasked: the exporter's causal constant becomes the causal words (no mask tensor); masked: causal and padding
    # are one mask computed at run time, the kernel's 4th input
    onnx_path = _export(_gpt2(), tmp_path / "gpt2.onnx", masked=masked, decoder=True)
    bundle = _package(onnx_path, tmp_path / "b", 2, masked=masked)
    att = [n for n in layout.decode((bundle / "model.plan").read_bytes()).nodes if n.op == Op.ATTENTION]
    if not masked:
        assert all(len(n.params) == 6 and n.params[3] == 1 and len(n.inputs) == 3 for n in att)
    feeds = {"input_ids": np.random.default_rng(2).integers(0, 100, (2, SEQ)).astype(np.int64)}
    if masked:
        mask = np.ones((2, SEQ), np.int64)
        mask[1, :4] = 0   # left padding, as batched generation pads prompts
        feeds["attention_mask"] = mask
    _check(onnx_path, bundle, feeds)


@pytest.mark.skipif(shutil.which("qemu-aarch64") is None, reason="qemu-user missing")
def test_bert_padding_mask_aarch64(tmp_path: Path) -> None:
    # the same kernel on the Pi 5 build (NEON), under qemu
    from packager.targets import edge as E
    onnx_path = _export(_bert(), tmp_path / "bert.onnx", masked=True)
    shapes = [f"input_ids=2x{SEQ}", f"attention_mask=2x{SEQ}"]
    assert cli([str(onnx_path), "-o", str(tmp_path / "b"), "--target", "pi5", "--no-verify",
                *sum((["--input-shape", s] for s in shapes), [])]) == 0
    bundle = tmp_path / "b"
    assert _kernels(bundle).count("ATTENTION") == LAYERS and "SOFTMAX" not in _kernels(bundle)
    mask = np.ones((2, SEQ), np.int64)
    mask[1, -5:] = 0
    feeds = {"input_ids": np.random.default_rng(3).integers(0, 100, (2, SEQ)).astype(np.int64), "attention_mask": mask}
    m = json.loads((bundle / "manifest.json").read_text())
    got = E.run_cli(bundle, feeds, m["outputs"], qemu=E.qemu_cmd("pi5"))["hidden"]
    np.testing.assert_allclose(got, reference_run(onnx.load(onnx_path), feeds)["hidden"], rtol=TOL, atol=TOL)
