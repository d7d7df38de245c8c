"""Packaging's verification inputs are the values the graph shows (packager/reference.py input_ranges): token ids
in range of their embedding table, an attention mask 0 / 1. Random int64 values for a mask made
(1 - mask) * lowest overflow: NaN on both sides and "max abs diff 0", which said nothing. A comparison with no
finite value now warns (an error under --profile strict), and NaN against a number is an infinite difference."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from packager.cli import main as cli
from packager.reference import compare, input_ranges

from .test_attention_masks import _Hidden

torch = pytest.importorskip("torch")


def _bert(path: Path) -> Path:
    from bench.models.zoo import _transformers   # imports transformers the way a CPU-only torch allows
    torch.manual_seed(0)
    cfg = _transformers().BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64, type_vocab_size=2,
                                     attn_implementation="eager")
    args = (torch.randint(0, 100, (2, 8)), torch.ones(2, 8, dtype=torch.int64))
    torch.onnx.export(_Hidden(_transformers().BertModel(cfg, add_pooling_layer=False).eval()), args, str(path),
                      input_names=["input_ids", "attention_mask"], output_names=["hidden"], opset_version=17,
                      dynamo=False)
    return path


def test_bert_mask_verification_is_finite(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    onnx_path = _bert(tmp_path / "bert.onnx")
    m = onnx.load(onnx_path)
    assert input_ranges(m) == {"input_ids": (0, 100), "attention_mask": (0, 2)}
    # the mask is found by what the graph does with it ((1 - float(mask)) * lowest), not only by its name
    for n in m.graph.node:
        n.input[:] = ["m" if x == "attention_mask" else x for x in n.input]
    m.graph.input[1].name = "m"
    assert input_ranges(m)["m"] == (0, 2)
    assert cli([str(onnx_path), "-o", str(tmp_path / "b"), "--target", "web"]) == 0
    v = json.loads((tmp_path / "b" / "manifest.json").read_text())["verification"]
    assert v["input_ranges"] == {"input_ids": [0, 100], "attention_mask": [0, 2]}, v
    assert v["finite_values"] == 2 * 8 * 32 and v["max_abs_diff"] < 1e-4, v
    assert "warning" not in capsys.readouterr().err


def test_nan_everywhere_warns(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """An output NaN for every input: the comparison is empty, and packaging says so (strict: refuses)."""
    g = helper.make_graph([helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["n"]),
                           helper.make_node("Sub", ["n", "one"], ["s"]), helper.make_node("Sqrt", ["s"], ["y"])],
                          "nan", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                          [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    path = tmp_path / "nan.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert cli([str(path), "-o", str(tmp_path / "b"), "--target", "web"]) == 0
    err = capsys.readouterr().err
    assert "warning: verification compared no finite value" in err, err
    assert json.loads((tmp_path / "b" / "manifest.json").read_text())["verification"]["finite_values"] == 0
    assert cli([str(path), "-o", str(tmp_path / "s"), "--target", "web", "--profile", "strict"]) != 0
    assert "error: verification compared no finite value" in capsys.readouterr().err
    assert cli([str(path), "-o", str(tmp_path / "e"), "--target", "pi5", "--profile", "strict"]) != 0
    assert "error: verification compared no finite value" in capsys.readouterr().err


def test_compare_counts_nan_against_a_number() -> None:
    nan, inf = np.float32("nan"), np.float32("inf")
    same = compare({"y": np.array([nan, inf, 1], np.float32)}, {"y": np.array([nan, inf, 1], np.float32)})
    assert same == {"max_abs_diff": 0.0, "max_rel_diff": 0.0, "finite_values": 1}
    for got in ([1, inf, 1], [nan, -inf, 1], [nan, 5, 1]):
        r = compare({"y": np.array(got, np.float32)}, {"y": np.array([nan, inf, 1], np.float32)})
        assert r["max_abs_diff"] == np.inf and r["max_rel_diff"] == np.inf, (got, r)
