"""--profile strict: explicit attributes, static shapes, recorded order, memory bound, determinism, refusals."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from onnx import helper

from packager import package
from packager.errors import PackagerError, UnsupportedError

from .conftest import f32, make_model, model_path


def test_strict_bundle_states_everything(tmp_path: Path) -> None:
    out = package(model_path("cifar10net"), out=tmp_path / "b", profile="strict", input_shapes={"image": (1, 3, 32, 32)}, emit_onnx=True)
    manifest = json.loads((out / "manifest.json").read_text())
    prof = manifest["profile"]
    assert prof["name"] == "strict"
    assert prof["deterministic"].startswith("two runs")
    assert prof["memory_bound_bytes"] >= manifest["plan"]["arena_bytes"] + manifest["files"]["model.plan"]["bytes"]
    order = prof["execution_order"]
    assert len(order) == manifest["plan"]["nodes"] and all({"kernel", "onnx_node"} <= set(s) for s in order)
    import onnx.inliner   # fused groups ship as local function calls: their bodies take the call's attributes
    m = onnx.inliner.inline_local_functions(onnx.load(str(out / "model.onnx")))
    assert {n.op_type for n in m.graph.node} >= {"Conv", "Relu", "Gemm"}
    for n in m.graph.node:
        have = {a.name for a in n.attribute}
        schema = onnx.defs.get_schema(n.op_type, manifest["source"]["opset"], n.domain)
        defaults = {k for k, a in schema.attributes.items() if a.default_value.type != onnx.AttributeProto.UNDEFINED}
        assert defaults <= have, f"{n.op_type} relies on defaults {defaults - have}"
        if n.op_type == "Conv":
            assert {"kernel_shape", "strides", "pads", "dilations"} <= have


def test_strict_refuses_symbolic_dims(tmp_path: Path) -> None:
    with pytest.raises(PackagerError, match="--profile strict: input 'image' has symbolic dimension 'batch'"):
        package(model_path("cifar10net"), out=tmp_path / "b", profile="strict")


@pytest.mark.parametrize("op,reason", [("Dropout", "training-only"), ("Unique", "data-dependent output shape")])
def test_strict_refuses_ops_outside_the_profile(tmp_path: Path, op: str, reason: str) -> None:
    m = make_model([helper.make_node(op, ["x"], ["y"], name="n0")], [f32("x", [4])], [f32("y", [None])])
    with pytest.raises(UnsupportedError, match=f"{op} .*--profile strict: .*{reason}"):
        package(m, out=tmp_path / "b", profile="strict")
