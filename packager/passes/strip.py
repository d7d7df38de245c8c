"""Stripping what inference does not need: doc strings, metadata_props, value_info naming values the graph
no longer has, the model's training_info (TrainingInfoProto: the ONNX spec's training-only algorithm
and initialization steps), and Dropout nodes in training mode (ONNX: random masking that only training
does; at inference Dropout is the identity). Each function returns what it removed, for the manifest."""
from __future__ import annotations

import numpy as np
import onnx


def strip_proto(model: onnx.ModelProto, keep_metadata: bool = False) -> dict:
    """In place on the protobuf (the fields onnx-ir does not carry: training_info, stale value_info)."""
    out: dict = {}
    if len(model.training_info):
        out["training_info"] = len(model.training_info)
        del model.training_info[:]
    produced = {o for n in model.graph.node for o in n.output} | {i.name for i in model.graph.input}
    keep = [v for v in model.graph.value_info if v.name in produced]
    if len(keep) != len(model.graph.value_info):
        out["unused_value_info"] = len(model.graph.value_info) - len(keep)
        del model.graph.value_info[:]
        model.graph.value_info.extend(keep)
    if keep_metadata:
        return out
    docs = metas = 0
    holders = [model, model.graph, *model.graph.node, *model.graph.input, *model.graph.output,
               *model.graph.value_info, *model.graph.initializer, *model.functions]
    for f in model.functions:
        holders.extend(f.node)
    for h in holders:
        if h.doc_string:
            docs += 1
            h.doc_string = ""
        if hasattr(h, "metadata_props") and len(h.metadata_props):
            metas += len(h.metadata_props)
            del h.metadata_props[:]
    if docs:
        out["doc_strings"] = docs
    if metas:
        out["metadata_props"] = metas
    return out


def strip_training(model: onnx.ModelProto) -> list[str]:
    """Dropouts with training_mode a constant true (and no reader of the mask) become Identity, in place:
    the identity pass then removes them. Returns their names."""
    consts = {i.name: i for i in model.graph.initializer}
    read = {i for n in model.graph.node for i in n.input} | {o.name for o in model.graph.output}
    names = []
    for node in model.graph.node:
        if node.op_type != "Dropout" or node.domain not in ("", "ai.onnx") or len(node.input) < 3:
            continue
        mode = consts.get(node.input[2])
        if mode is None or not bool(np.asarray(onnx.numpy_helper.to_array(mode)).reshape(-1)[0]):
            continue
        if len(node.output) > 1 and node.output[1] in read:
            continue
        names.append(node.name or node.output[0])
        node.op_type = "Identity"
        del node.input[1:]
        del node.output[1:]
        del node.attribute[:]
    return names
