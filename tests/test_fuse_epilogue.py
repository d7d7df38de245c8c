"""Epilogue fusion pass: which groups fuse, and that the order stays valid."""
from __future__ import annotations

import numpy as np
from onnx import helper

from packager.passes.fuse_epilogue import ACT_CLIP, ACT_RELU, Fused, fuse_epilogues


def _conv(x: str, y: str, name: str):
    return helper.make_node("Conv", [x, "w", "b"], [y], name=name)


def test_conv_add_relu_fuses_at_the_add_position() -> None:
    # shortcut conv 's' is computed AFTER conv 'c2' but before the Add: the group must run at the Relu
    nodes = [_conv("x", "a", "c2"), _conv("x", "s", "short"), helper.make_node("Add", ["a", "s"], ["sum"]),
             helper.make_node("Relu", ["sum"], ["y"])]
    shapes = {v: (1, 8, 4, 4) for v in ("x", "a", "s", "sum", "y")}
    out = fuse_epilogues(nodes, ["y"], shapes, {}, 17)
    assert [type(s).__name__ for s in out] == ["NodeProto", "Fused"]
    f = out[1]
    assert isinstance(f, Fused) and f.head.name == "c2" and f.residual == "s" and f.activation == (ACT_RELU, [])
    assert list(f.head.output) == ["y"] and out[0].name == "short"


def test_clip_with_constant_bounds_fuses_and_graph_outputs_block_fusion() -> None:
    consts = {"lo": np.float32(0), "hi": np.float32(6)}
    nodes = [_conv("x", "a", "c"), helper.make_node("Clip", ["a", "lo", "hi"], ["y"])]
    out = fuse_epilogues(nodes, ["y"], {}, consts, 17)
    assert len(out) == 1 and out[0].activation == (ACT_CLIP, [0.0, 6.0])
    # 'a' is itself a graph output: it must stay materialized
    out = fuse_epilogues(nodes, ["y", "a"], {}, consts, 17)
    assert len(out) == 2 and not any(isinstance(s, Fused) for s in out)


def test_two_consumers_block_fusion() -> None:
    nodes = [_conv("x", "a", "c"), helper.make_node("Relu", ["a"], ["y"]), helper.make_node("Neg", ["a"], ["z"])]
    out = fuse_epilogues(nodes, ["y", "z"], {}, {}, 17)
    assert not any(isinstance(s, Fused) for s in out)


def test_silu_pair_fuses_in_either_operand_order() -> None:
    from packager.passes.fuse_epilogue import ACT_SILU
    for mul_inputs in (["a", "s"], ["s", "a"]):
        nodes = [_conv("x", "a", "c"), helper.make_node("Sigmoid", ["a"], ["s"]), helper.make_node("Mul", mul_inputs, ["y"])]
        out = fuse_epilogues(nodes, ["y"], {}, {}, 17)
        assert len(out) == 1 and out[0].activation == (ACT_SILU, []) and list(out[0].head.output) == ["y"]
        assert [n.op_type for n in out[0].chain] == ["Conv", "Sigmoid", "Mul"]   # the shipped graph's function body


def test_silu_pair_blocked_when_the_sigmoid_or_the_conv_output_is_used_elsewhere() -> None:
    nodes = [_conv("x", "a", "c"), helper.make_node("Sigmoid", ["a"], ["s"]), helper.make_node("Mul", ["a", "s"], ["y"]),
             helper.make_node("Neg", ["s"], ["z"])]
    out = fuse_epilogues(nodes, ["y", "z"], {}, {}, 17)
    assert not any(isinstance(s, Fused) for s in out)
    # a gate that is not x * sigmoid(x): sigmoid of the conv times another tensor (squeeze-excite's scale)
    nodes = [_conv("x", "a", "c"), helper.make_node("Sigmoid", ["a"], ["s"]), helper.make_node("Mul", ["s", "x"], ["y"])]
    out = fuse_epilogues(nodes, ["y"], {}, {}, 17)
    assert [type(s).__name__ for s in out] == ["Fused", "NodeProto"] and out[0].activation[0] == 4   # Sigmoid alone
