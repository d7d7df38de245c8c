"""Seeded construction and ONNX export (opset 17, legacy TorchScript exporter) of one registered model."""
from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.nn as nn

from .registry import Spec, spec as registered

OPSET = 17


def randomize_batchnorm(model: nn.Module) -> None:
    """Non-trivial BatchNorm statistics, so folding them is not a no-op (fresh BN is the identity)."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.1, 0.1)


def seeded_model(spec: Spec) -> nn.Module:
    """The module in eval mode; the same weights on every call (the RNG is reseeded)."""
    torch.manual_seed(0)
    model = spec.builder()
    randomize_batchnorm(model)
    return model.eval()


def build(name: str, outdir: str | os.PathLike) -> Path:
    spec = registered(name)
    model = seeded_model(spec)
    path = Path(outdir) / f'{name}.onnx'
    # written beside, then renamed: a reader of a shared cache never sees half a file
    tmp = path.with_name(f'.{name}.onnx.{os.getpid()}.tmp')
    extra = dict(do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE) if spec.unfused else {}
    try:
        # The example is drawn after the weights, as the reference script did: same RNG stream, same bytes.
        torch.onnx.export(model, spec.example(), str(tmp), input_names=spec.input_names(), output_names=[spec.output],
                          opset_version=OPSET, dynamo=False, dynamic_axes=spec.dynamic_axes(), **extra)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
