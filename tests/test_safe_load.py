"""Hostile models: every attack of the ONNX external-data security model, plus graph-level ones.
Each builds the hostile model on disk and checks the exact error; nothing outside the folder is read."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from packager.errors import ModelLoadError
from packager.model_load import load_model

from .conftest import f32, make_model

W = np.arange(6, dtype=np.float32).reshape(2, 3)


def _external_model(folder: Path, entries: dict[str, str], data: bytes | None = W.tobytes(),
                    data_name: str = "w.bin") -> Path:
    """x[2,3] + w -> y, with w stored externally under the given external_data entries."""
    folder.mkdir(parents=True, exist_ok=True)
    if data is not None:
        (folder / data_name).write_bytes(data)
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3])
    w.data_location = TensorProto.EXTERNAL
    for k, v in entries.items():
        e = w.external_data.add()
        e.key, e.value = k, v
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [f32("x", [2, 3])], [f32("y", [2, 3])], [w])
    p = folder / "model.onnx"
    p.write_bytes(m.SerializeToString())
    return p


def test_valid_external_data_loads(tmp_path: Path) -> None:
    m = load_model(_external_model(tmp_path / "m", {"location": "w.bin", "offset": "0", "length": "24"}))
    np.testing.assert_array_equal(numpy_helper.to_array(m.graph.initializer[0]), W)


@pytest.mark.parametrize("location,expect", [
    ("../secret.bin", "escapes the model's folder"),
    ("sub/../../secret.bin", "escapes the model's folder"),
    ("/etc/passwd", "is an absolute path"),
    ("C:\\Windows\\win.ini", "is an absolute path"),
    ("", "has no location"),
])
def test_path_traversal_refused(tmp_path: Path, location: str, expect: str) -> None:
    (tmp_path / "secret.bin").write_bytes(W.tobytes())
    p = _external_model(tmp_path / "m", {"location": location, "length": "24"})
    with pytest.raises(ModelLoadError, match=expect):
        load_model(p)


def test_symlink_final_component_refused(tmp_path: Path) -> None:
    (tmp_path / "secret.bin").write_bytes(W.tobytes())
    p = _external_model(tmp_path / "m", {"location": "link.bin"}, data=None)
    os.symlink(tmp_path / "secret.bin", tmp_path / "m" / "link.bin")
    with pytest.raises(ModelLoadError, match="'link.bin' is a symbolic link"):
        load_model(p)


def test_symlink_directory_component_refused(tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "w.bin").write_bytes(W.tobytes())
    p = _external_model(tmp_path / "m", {"location": "d/w.bin"}, data=None)
    os.symlink(tmp_path / "outside", tmp_path / "m" / "d")
    with pytest.raises(ModelLoadError, match="path component 'd' is a symbolic link"):
        load_model(p)


def test_hard_link_refused(tmp_path: Path) -> None:
    (tmp_path / "secret.bin").write_bytes(W.tobytes())
    p = _external_model(tmp_path / "m", {"location": "w.bin"}, data=None)
    os.link(tmp_path / "secret.bin", tmp_path / "m" / "w.bin")
    with pytest.raises(ModelLoadError, match="has 2 hard links"):
        load_model(p)


@pytest.mark.parametrize("key", ["evil_attr", "__class__", "__dict__", "basepath"])
def test_unknown_external_data_key_refused(tmp_path: Path, key: str) -> None:
    p = _external_model(tmp_path / "m", {"location": "w.bin", key: "x"})
    with pytest.raises(ModelLoadError, match=f"unknown external data key '{key}'"):
        load_model(p)


@pytest.mark.parametrize("key,value", [("offset", "-1"), ("length", "-1"), ("offset", "abc"), ("length", "1e3"),
                                       ("offset", "٣")])
def test_bad_offset_or_length_refused(tmp_path: Path, key: str, value: str) -> None:
    p = _external_model(tmp_path / "m", {"location": "w.bin", key: value})
    with pytest.raises(ModelLoadError, match=f"{key} must be a non-negative integer, got '{value}'"):
        load_model(p)


def test_offset_past_end_refused(tmp_path: Path) -> None:
    p = _external_model(tmp_path / "m", {"location": "w.bin", "offset": "25"})
    with pytest.raises(ModelLoadError, match=r"offset 25 is past the end of 'w.bin' \(24 bytes\)"):
        load_model(p)


def test_offset_plus_length_past_end_refused(tmp_path: Path) -> None:
    p = _external_model(tmp_path / "m", {"location": "w.bin", "offset": "8", "length": "24"})
    with pytest.raises(ModelLoadError, match=r"offset 8 \+ length 24 is past the end"):
        load_model(p)


def test_huge_length_never_allocates(tmp_path: Path) -> None:
    p = _external_model(tmp_path / "m", {"location": "w.bin", "length": str(2**62)})
    with pytest.raises(ModelLoadError, match="past the end of 'w.bin'"):
        load_model(p)


def test_missing_external_file(tmp_path: Path) -> None:
    p = _external_model(tmp_path / "m", {"location": "nope.bin"})
    with pytest.raises(ModelLoadError, match="'nope.bin' not found"):
        load_model(p)


def test_oversized_protobuf_refused(tmp_path: Path, monkeypatch) -> None:
    import packager.model_load as ml
    p = _external_model(tmp_path / "m", {"location": "w.bin"})
    monkeypatch.setattr(ml, "MAX_MODEL_BYTES", 16)
    with pytest.raises(ModelLoadError, match="exceeds protobuf's 2 GiB limit"):
        load_model(p)


def test_cycle_refused() -> None:
    m = make_model([helper.make_node("Relu", ["b"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["b"], name="n2")],
                   [f32("x", [2])], [f32("b", [2])])
    with pytest.raises(ModelLoadError, match="cycle"):
        load_model(m)


def test_dangling_input_refused() -> None:
    m = make_model([helper.make_node("Relu", ["ghost"], ["y"], name="n1")], [f32("x", [2])], [f32("y", [2])])
    with pytest.raises(ModelLoadError, match="reads 'ghost', which no input, initializer or earlier node defines"):
        load_model(m)


def test_custom_domain_refused_unless_allowed() -> None:
    node = helper.make_node("Thing", ["x"], ["y"], name="n0", domain="com.example")
    g = helper.make_graph([node], "g", [f32("x", [2])], [f32("y", [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    m.ir_version = 8
    with pytest.raises(ModelLoadError, match="custom domain 'com.example', which is refused"):
        load_model(m)
    assert load_model(m, allow_domains=frozenset({"com.example"})) is m


def test_modelproto_with_external_data_needs_a_path(tmp_path: Path) -> None:
    p = _external_model(tmp_path / "m", {"location": "w.bin"})
    m = onnx.load(str(p), load_external_data=False)
    with pytest.raises(ModelLoadError, match="pass the model's path"):
        load_model(m)


def test_every_custom_domain_node_in_one_error() -> None:
    """Three refused custom-domain nodes of two domains: one error naming every one, grouped by op, and the
    --allow-domain flags that would accept the model."""
    nodes = [helper.make_node("Foo", ["x"], ["a"], domain="com.a", name="f1"),
             helper.make_node("Foo", ["a"], ["b"], domain="com.a", name="f2"),
             helper.make_node("Bar", ["b"], ["y"], domain="com.b", name="b1")]
    g = helper.make_graph(nodes, "g", [f32("x", [1])], [f32("y", [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.a", 1),
                                            helper.make_opsetid("com.b", 2)])
    with pytest.raises(ModelLoadError) as e:
        load_model(m)
    text = str(e.value)
    assert "--allow-domain com.a --allow-domain com.b" in text
    assert "op com.a.Foo (opset com.a v1) x2:" in text and "nodes 'f1', 'f2'" in text
    assert "op com.b.Bar (opset com.b v2) x1:" in text and "node 'b1'" in text


def test_ir3_initializers_as_inputs_load() -> None:
    """IR 3 lists every initializer as a graph input too (the onnx wheel's light models): loaded as they are; the
    packager treats them as weights (tests/test_check_verb.py runs such a bundle)."""
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [f32("x", [2, 3]), f32("w", [2, 3])],
                          [f32("y", [2, 3])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)])
    m.ir_version = 3
    assert load_model(m).ir_version == 3
