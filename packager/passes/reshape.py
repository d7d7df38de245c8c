"""Reshape chains collapsed: a run of view ops (Reshape, Flatten, Squeeze, Unsqueeze) whose intermediate
results nobody else reads becomes one Reshape to the last one's shape. After analysis every shape is
static, so the target is a constant (no 0 / -1 left to resolve)."""
from __future__ import annotations

import numpy as np
import onnx_ir as ir

VIEWS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}


def _is_view(node: ir.Node | None) -> bool:
    return node is not None and node.op_type in VIEWS and node.domain in ("", "ai.onnx")


def collapse_reshapes(model: ir.Model) -> ir.Model:
    g = model.graph
    for node in list(g):
        if node.graph is not g or not _is_view(node):
            continue
        out = node.outputs[0]
        if out.shape is None or not all(isinstance(d, int) and d > 0 for d in out.shape):
            continue
        uses = [u for u, _ in out.uses()]
        if not out.is_graph_output() and len(uses) == 1 and _is_view(uses[0]):
            continue   # not the end of its chain: the last view op collapses it
        chain, src = [node], node.inputs[0]
        while _is_view(src.producer()) and not src.is_graph_output() and len(list(src.uses())) == 1:
            chain.append(src.producer())
            src = chain[-1].inputs[0]
        if len(chain) < 2:
            continue
        shape = ir.Value(name=f"{out.name}__shape", const_value=ir.tensor(np.array(out.shape, np.int64)))
        g.register_initializer(shape)
        new = ir.node("Reshape", [src, shape], name=node.name)
        ir.convenience.replace_nodes_and_values(g, node, chain[::-1], [new], [out], [new.outputs[0]])
    return model
