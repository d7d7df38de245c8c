"""Fused attention with run-time shapes (plan version 2): a transformers BertModel exported by torch.onnx with dynamic
batch and sequence axes and an attention_mask input, packaged by the CLI as a user would (no --input-shape: a
version-2 plan), fuses every attention block into ATTENTION with block_rows left to the core (word 2 = 0), and one
bundle runs at several batch sizes and sequence lengths with real padding, matching onnxruntime, in Node on the
SIMD, relaxed and scalar builds and on the Pi 5 build under qemu."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from packager.cli import main as cli
from packager.plan import layout
from packager.plan.opcodes import Op
from packager.reference import reference_run

from .test_attention_masks import LAYERS, TOL, _export, _transformers, torch   # (skips without torch, transformers)
from .test_web_dynamic import _node_major, _node_runs, _outputs

# (batch, sequence): Lq = Lk from 5 to 40, so the derived block rows and the scratch change with each run
SHAPES = [(2, 12), (1, 5), (3, 40)]


def _feeds(batch: int, seq: int, seed: int) -> dict[str, np.ndarray]:
    """Random ids; the last row padded at its end (half its keys), the first row unpadded."""
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), np.int64)
    if batch > 1:
        mask[-1, seq // 2:] = 0
    return {"input_ids": rng.integers(0, 100, (batch, seq)).astype(np.int64), "attention_mask": mask}


def _checked_plan(bundle: Path) -> None:
    plan = layout.decode((bundle / "model.plan").read_bytes())
    assert plan.dynamic is not None, "a version-2 plan"
    kernels = [Op(n.op).name for n in plan.nodes]
    assert kernels.count("ATTENTION") == LAYERS and "SOFTMAX" not in kernels, kernels
    assert all(n.params[2] == 0 for n in plan.nodes if n.op == Op.ATTENTION), "block_rows derived by the core"


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> Path:
    """test_attention_masks' small BERT with BERT's 512 positions: the packager probes sequences past 64."""
    torch.manual_seed(0)
    cfg = _transformers().BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=LAYERS, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=512, attn_implementation="eager")
    model = _transformers().BertModel(cfg, add_pooling_layer=False)
    return _export(model, tmp_path_factory.mktemp("attdyn") / "bert.onnx", masked=True)


@pytest.mark.skipif(_node_major() < 20, reason="needs Node >= 20")
def test_bert_dynamic_axes_in_node(bert: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    assert cli([str(bert), "-o", str(bundle), "--target", "web"]) == 0
    assert json.loads((bundle / "manifest.json").read_text())["plan"]["version"] == 2
    _checked_plan(bundle)
    model = onnx.load(bert)
    runs = [_feeds(b, s, i) for i, (b, s) in enumerate(SHAPES)]
    want = [reference_run(model, f)["hidden"] for f in runs]
    for build in ("simd", "relaxed", "scalar", "threads"):   # threads: 2
        res = _node_runs(tmp_path / build, bundle, runs, build=build)
        for r, w in zip(res["runs"], want):
            got = _outputs(r)["hidden"]
            assert got.shape == w.shape
            np.testing.assert_allclose(got, w, rtol=TOL, atol=TOL, err_msg=build)


@pytest.mark.skipif(shutil.which("qemu-aarch64") is None or shutil.which("aarch64-linux-gnu-gcc") is None,
                    reason="qemu-user or gcc-aarch64-linux-gnu missing")
def test_bert_dynamic_axes_aarch64(bert: Path, tmp_path: Path) -> None:
    from packager.targets import edge as E
    bundle = tmp_path / "b"
    assert cli([str(bert), "-o", str(bundle), "--target", "pi5", "--no-verify"]) == 0
    _checked_plan(bundle)
    outputs = json.loads((bundle / "manifest.json").read_text())["outputs"]
    model = onnx.load(bert)
    for i, (b, s) in enumerate(SHAPES[1:]):
        feeds = _feeds(b, s, 10 + i)
        got = E.run_cli(bundle, feeds, outputs, qemu=E.qemu_cmd("pi5"))["hidden"]
        np.testing.assert_allclose(got, reference_run(model, feeds)["hidden"], rtol=TOL, atol=TOL)


@pytest.mark.parametrize("mask", ["row", "where"])
def test_masks_at_run_time_shapes(mask: str, tmp_path: Path) -> None:
    """Q·Kt·0.5 + mask -> Softmax -> ·V with batch, Lq and Lk symbolic: a mask fed as [Lk] (viewed at the scores'
    rank by a VIEW, its dims resolved per run) or a Where on a bool [B, 1, 1, Lk] computed at run time (the WHERE
    making the additive mask at cond's size). One bundle at three shapes, under wasmtime."""
    from onnx import TensorProto, helper, numpy_helper
    from packager import load_bundle, package
    f32 = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)   # noqa: E731
    ins = [f32("q", ["b", 2, "lq", 4]), f32("kt", ["b", 2, 4, "lk"]), f32("v", ["b", 2, "lk", 5])]
    inits = [numpy_helper.from_array(np.float32(0.5), "half"), numpy_helper.from_array(np.float32(0), "zero"),
             numpy_helper.from_array(np.float32(np.finfo(np.float32).min), "fill")]
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s0"]), helper.make_node("Mul", ["s0", "half"], ["s1"])]
    if mask == "row":
        ins.append(f32("m", ["lk"]))
        nodes.append(helper.make_node("Add", ["s1", "m"], ["s2"]))
    else:
        ins.append(f32("m", ["b", 1, 1, "lk"]))
        nodes += [helper.make_node("Greater", ["m", "zero"], ["keep"]),
                  helper.make_node("Where", ["keep", "s1", "fill"], ["s2"])]
    nodes += [helper.make_node("Softmax", ["s2"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    g = helper.make_graph(nodes, "att", ins, [f32("y", ["b", 2, "lq", 5])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    bundle = package(model, target="web", out=tmp_path / "b", verify=False)
    plan = layout.decode((bundle / "model.plan").read_bytes())
    assert plan.dynamic is not None
    att = [n for n in plan.nodes if n.op == Op.ATTENTION]
    assert len(att) == 1 and att[0].params[2] == 0 and len(att[0].inputs) == 4
    assert "SOFTMAX" not in [Op(n.op).name for n in plan.nodes]
    made_by = {o: Op(n.op).name for n in plan.nodes for o in n.outputs}
    assert made_by[att[0].inputs[3]] == ("VIEW" if mask == "row" else "WHERE")
    rng = np.random.default_rng(5)
    for b, lq, lk in [(2, 6, 9), (1, 1, 3), (3, 17, 40)]:
        feeds = {"q": rng.standard_normal((b, 2, lq, 4)), "kt": rng.standard_normal((b, 2, 4, lk)),
                 "v": rng.standard_normal((b, 2, lk, 5)),
                 "m": np.where(rng.random((lk,) if mask == "row" else (b, 1, 1, lk)) < 0.3, -1e9, 0.5)}
        feeds = {k: np.asarray(a, np.float32) for k, a in feeds.items()}
        want = reference_run(model, feeds)["y"]
        for variant in ("simd", "scalar"):
            got = load_bundle(bundle, variant).run(feeds)["y"]
            np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL, err_msg=f"{variant} {(b, lq, lk)}")


@pytest.mark.skipif(_node_major() < 20, reason="needs Node >= 20")
def test_bert_short_position_table_gets_run_time_shapes(tmp_path: Path) -> None:
    """A BERT with 64 positions fails at the default probe sequences (64/96: its position ids run past the table);
    the packager probes again at smaller ones and still ships a version-2 plan, with a notice saying so, that runs
    up to the table's 64 positions and refuses 80 with an error, not a crash."""
    torch.manual_seed(0)
    cfg = _transformers().BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=LAYERS, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64, attn_implementation="eager")
    src = _export(_transformers().BertModel(cfg, add_pooling_layer=False), tmp_path / "bert64.onnx", masked=True)
    bundle = tmp_path / "b"
    assert cli([str(src), "-o", str(bundle), "--target", "web"]) == 0
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["plan"]["version"] == 2
    assert any("probed at smaller sizes" in n for n in manifest.get("notices", [])), manifest.get("notices")
    _checked_plan(bundle)
    model = onnx.load(src)
    runs = [_feeds(2, 12, 0), _feeds(1, 64, 1), _feeds(1, 80, 2)]
    res = _node_runs(tmp_path / "relaxed", bundle, runs, build="relaxed")
    for r, f in zip(res["runs"][:2], runs):
        np.testing.assert_allclose(_outputs(r)["hidden"], reference_run(model, f)["hidden"], rtol=TOL, atol=TOL)
    assert "error" in res["runs"][2], res["runs"][2]
