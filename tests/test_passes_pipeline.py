"""The optimizer stage end to end: package -> manifest report -> shipped model.onnx -> bundle vs onnxruntime
on the ORIGINAL model."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from packager import load_bundle, package
from packager.reference import random_inputs, reference_run

from .conftest import REPO, f32, make_model, model_path


def _ops(model: onnx.ModelProto) -> list[str]:
    """Op types of the graph and of every local function body."""
    return [n.op_type for n in model.graph.node] + [n.op_type for f in model.functions for n in f.node]


def test_cifar10net_unfused_ends_smaller_than_the_exporter_folded_graph(tmp_path) -> None:
    path = package(model_path("cifar10net_unfused"), out=tmp_path / "b", dynamic=False, emit_onnx=True)
    shipped = onnx.load(str(path / "model.onnx"))
    onnx.checker.check_model(shipped, full_check=True)
    folded = onnx.load(str(model_path("cifar10net")), load_external_data=False)
    assert "BatchNormalization" not in _ops(shipped)
    assert len(shipped.graph.node) < len(folded.graph.node), (len(shipped.graph.node), len(folded.graph.node))
    m = json.loads((path / "manifest.json").read_text())
    passes = {r["pass"]: r for r in m["optimizations"]}
    assert passes["fold_batchnorm"]["changed"] == {"BatchNormalization": -3}
    assert m["optimizations"][0]["nodes_before"] == 20 and m["optimizations"][-1]["nodes_after"] == len(shipped.graph.node)
    assert m["verification"]["max_abs_diff"] < 1e-4
    # the shipped graph computes what the source model does (onnxruntime inlines the fused functions)
    b = load_bundle(path)
    feeds = random_inputs(b.inputs, seed=3)
    original = onnx.load(str(model_path("cifar10net_unfused")))
    want, got = reference_run(original, feeds), reference_run(shipped, feeds)
    np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b.run(feeds)["logits"], want["logits"], rtol=1e-4, atol=1e-4)


def test_cli_no_optimize_and_inspect_report(tmp_path) -> None:
    src = str(model_path("cifar10net_unfused"))
    env_cmd = [sys.executable, "-m", "packager.cli"]
    r = subprocess.run(env_cmd + [src, "-o", str(tmp_path / "opt"), "--static"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "optimize: fold_batchnorm: 20 -> 17 nodes (BatchNormalization -3)" in r.stderr
    r = subprocess.run(env_cmd + [src, "-o", str(tmp_path / "raw"), "--no-optimize", "--static", "--emit-onnx"], cwd=REPO, capture_output=True,
                       text=True)
    assert r.returncode == 0 and "optimize:" not in r.stderr, r.stderr
    raw = json.loads((tmp_path / "raw" / "manifest.json").read_text())
    opt = json.loads((tmp_path / "opt" / "manifest.json").read_text())
    assert "optimizations" not in raw and "BatchNormalization" in _ops(onnx.load(str(tmp_path / "raw" / "model.onnx")))
    assert opt["plan"]["nodes"] < raw["plan"]["nodes"]   # BN folded away: fewer kernels
    r = subprocess.run(env_cmd + ["inspect", str(tmp_path / "opt")], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0 and "optimize 20 -> 11 ONNX nodes" in r.stdout and "fold_batchnorm" in r.stdout, r.stdout


def _mixed(opset: int) -> onnx.ModelProto:
    """Something for every pass, in the form each opset spells it."""
    rng = np.random.default_rng(opset)
    w = lambda n, *s: numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)  # noqa: E731
    var = numpy_helper.from_array(rng.uniform(0.5, 2, 4).astype(np.float32), "var")
    nodes = [helper.make_node("Identity", ["x"], ["xi"]),
             helper.make_node("Conv", ["xi", "cw", "cb"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t1"], perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["t1"], ["t2"], perm=[0, 3, 1, 2]),
             helper.make_node("Flatten", ["t2"], ["f"], axis=1),
             helper.make_node("Reshape", ["f", "shape"], ["f2"]),
             helper.make_node("MatMul", ["f2", "mw"], ["mm"]),
             helper.make_node("Add", ["mm", "mb"], ["y"])]
    inits = [w("cw", 4, 3, 3, 3), w("cb", 4), w("g", 4), w("be", 4), w("mu", 4), var,
             numpy_helper.from_array(np.array([1, 64], np.int64), "shape"), w("mw", 64, 5), w("mb", 5)]
    return make_model(nodes, [f32("x", [1, 3, 4, 4])], [f32("y", [1, 5])], inits, opset=opset)


@pytest.mark.parametrize("opset", [7, 9, 11, 13, 17, 21, 23])
def test_every_pass_across_opsets(opset: int, tmp_path) -> None:
    path = package(_mixed(opset), out=tmp_path / "b", emit_onnx=True)
    m = json.loads((path / "manifest.json").read_text())
    assert m["verification"]["max_abs_diff"] < 1e-4, m["verification"]
    shipped = onnx.load(str(path / "model.onnx"))
    onnx.checker.check_model(shipped, full_check=True)
    changed = {r["pass"] for r in m["optimizations"] if r["changed"]}
    assert {"eliminate_identity", "fold_batchnorm", "eliminate_transposes", "collapse_reshapes",
            "matmul_add_to_gemm", "fuse_epilogue"} <= changed, m["optimizations"]
    assert sorted(n.op_type for n in shipped.graph.node) == ["Conv_Relu", "Gemm", "Reshape"]


def test_metadata_kept_on_request_and_training_dropout_stripped(tmp_path) -> None:
    nodes = [helper.make_node("Dropout", ["x", "ratio", "train"], ["d"], doc_string="regularizer"),
             helper.make_node("Relu", ["d"], ["y"])]
    model = make_model(nodes, [f32("x", [2, 8])], [f32("y", [2, 8])],
                       [numpy_helper.from_array(np.array(0.5, np.float32), "ratio"),
                        numpy_helper.from_array(np.array(True), "train")], opset=13)
    helper.set_model_props(model, {"license": "MIT"})
    path = package(model, out=tmp_path / "a", emit_onnx=True)
    m = json.loads((path / "manifest.json").read_text())
    assert m["stripped"]["training_dropout"] == ["d"] and m["stripped"]["metadata_props"] == 1
    shipped = onnx.load(str(path / "model.onnx"))
    assert [n.op_type for n in shipped.graph.node] == ["Relu"] and not shipped.metadata_props
    assert m["verification"]["max_abs_diff"] == 0.0
    kept = onnx.load(str(package(model, out=tmp_path / "k", keep_metadata=True, emit_onnx=True) / "model.onnx"))
    assert {p.key: p.value for p in kept.metadata_props} == {"license": "MIT"}


def test_a_wrong_pass_is_caught_by_verification(tmp_path, monkeypatch) -> None:
    """Verification runs onnxruntime on the graph before optimization: a pass that changes the math shows."""
    import onnx_ir as ir

    from packager import optimizer

    def negate_weights(m: ir.Model) -> None:
        for v in m.graph.initializers.values():
            if v.name == "conv1.weight":
                v.const_value = ir.tensor(-v.const_value.numpy())
    monkeypatch.setattr(optimizer, "PASSES", optimizer.PASSES + [("negate", "a broken pass", negate_weights)])
    path = package(model_path("cifar10net"), out=tmp_path / "b", dynamic=False)
    m = json.loads((path / "manifest.json").read_text())
    assert m["verification"]["max_rel_diff"] > 0.1, m["verification"]   # far beyond the 1e-4 models meet
    assert m["optimizations"][-2]["pass"] == "negate"


def test_a_failing_pass_is_skipped_and_recorded(tmp_path, monkeypatch) -> None:
    from packager import optimizer

    def broken(m) -> None:
        raise ValueError("cannot handle this graph")
    monkeypatch.setattr(optimizer, "PASSES", [("broken", "raises", broken)] + optimizer.PASSES)
    path = package(model_path("cifar10net_unfused"), out=tmp_path / "b", dynamic=False, emit_onnx=True)
    m = json.loads((path / "manifest.json").read_text())
    assert m["optimizations"][1] == {"pass": "broken", "source": "raises",
                                     "skipped": "ValueError: cannot handle this graph"}
    assert m["verification"]["max_abs_diff"] < 1e-4
    assert "BatchNormalization" not in _ops(onnx.load(str(path / "model.onnx")))


def test_a_bundles_model_onnx_packages_again(tmp_path) -> None:
    """The shipped graph (fused groups as local functions) is a model edgepack itself accepts: functions
    are inlined at load (bounded, acyclic), and the second bundle has the same plan."""
    first = package(model_path("cifar10net_unfused"), out=tmp_path / "a", dynamic=False, emit_onnx=True)
    second = package(first / "model.onnx", out=tmp_path / "b", dynamic=False)
    assert (first / "model.plan").read_bytes() == (second / "model.plan").read_bytes()


def test_function_expansion_is_bounded_and_acyclic() -> None:
    from packager.errors import ModelLoadError
    from packager.model_load import MAX_INLINED_NODES, inline_functions
    d = "my.fns"
    # F0 = two Relus, F(i) = two calls of F(i-1): 2^21 nodes once inlined
    fns = [helper.make_function(d, "F0", ["X"], ["Y"], [helper.make_node("Relu", ["X"], ["T"]),
                                                        helper.make_node("Relu", ["T"], ["Y"])],
                                [helper.make_opsetid("", 17)])]
    for i in range(1, 21):
        fns.append(helper.make_function(d, f"F{i}", ["X"], ["Y"],
                                        [helper.make_node(f"F{i - 1}", ["X"], ["T"], domain=d),
                                         helper.make_node(f"F{i - 1}", ["T"], ["Y"], domain=d)],
                                        [helper.make_opsetid("", 17), helper.make_opsetid(d, 1)]))
    model = make_model([helper.make_node("F20", ["x"], ["y"], domain=d)], [f32("x", [2])], [f32("y", [2])])
    model.opset_import.append(helper.make_opsetid(d, 1))
    model.functions.extend(fns)
    with pytest.raises(ModelLoadError, match=f"would make {2 ** 21} nodes \\(limit {MAX_INLINED_NODES}\\)"):
        inline_functions(model)
    del model.functions[:]
    model.functions.append(helper.make_function(d, "F20", ["X"], ["Y"], [helper.make_node("F20", ["X"], ["Y"], domain=d)],
                                                [helper.make_opsetid("", 17), helper.make_opsetid(d, 1)]))
    with pytest.raises(ModelLoadError, match="calls itself"):
        inline_functions(model)
