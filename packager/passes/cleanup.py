"""Dead-node / unused-initializer removal and Identity / inference-Dropout elimination.

Both are onnx-ir passes (RemoveUnusedNodesPass, IdentityEliminationPass); this module adds the one
step they lack: a Dropout that does not train (training_mode absent or a constant false) and whose
mask nobody reads is the identity, so it becomes an Identity node first."""
from __future__ import annotations

import numpy as np
import onnx_ir as ir
import onnx_ir.passes.common as common


def is_inference_dropout(node: ir.Node) -> bool:
    """Dropout computing y = x: not training, mask output absent or unused."""
    if node.op_type != "Dropout" or node.domain not in ("", "ai.onnx"):
        return False
    if len(node.outputs) > 1 and (node.outputs[1].uses() or node.outputs[1].is_graph_output()):
        return False
    if len(node.inputs) > 2 and node.inputs[2] is not None:
        t = node.inputs[2].const_value
        if t is None or bool(np.asarray(t.numpy()).reshape(-1)[0]):
            return False
    return True


def dropout_to_identity(model: ir.Model) -> int:
    """Replace each inference Dropout by Identity(x) (in place); returns how many."""
    n = 0
    for node in list(model.graph):
        if is_inference_dropout(node):
            ident = ir.node("Identity", [node.inputs[0]], name=node.name)
            ir.convenience.replace_nodes_and_values(model.graph, node, [node], [ident], [node.outputs[0]],
                                                    [ident.outputs[0]])
            n += 1
    return n


def eliminate_identity(model: ir.Model) -> ir.Model:
    """Inference Dropouts and Identity nodes removed (graph outputs keep their names)."""
    dropout_to_identity(model)
    common.IdentityEliminationPass()(model)
    return model


def remove_dead(model: ir.Model) -> ir.Model:
    """Nodes whose outputs reach no graph output, and initializers no node reads, removed."""
    common.RemoveUnusedNodesPass()(model)
    return model
