"""The models the project builds: name -> how to build and export it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn as nn

from .cnn import CIFAR10Net
from .minilm import VOCAB, MiniLMLike, minilm_explicit
from .mobilenet import MobileNetV2
from .resnet import ResNet18

BATCH = {0: 'batch'}
IMAGE_DYN = {0: 'batch', 2: 'height', 3: 'width'}
TOKENS_DYN = {0: 'batch', 1: 'sequence'}


@dataclass(frozen=True)
class Spec:
    builder: Callable[[], nn.Module]            # called right after torch.manual_seed(0)
    example: Callable[[], torch.Tensor]         # the traced input (its values do not reach the graph)
    input: str
    output: str
    input_axes: dict[int, str] = field(default_factory=dict)    # symbolic dims of the input ({}: all static)
    output_axes: dict[int, str] = field(default_factory=dict)
    unfused: bool = False                       # no constant folding, BatchNormalization kept in the graph

    def dynamic_axes(self) -> dict[str, dict[int, str]] | None:
        return {self.input: self.input_axes, self.output: self.output_axes} if self.input_axes else None


def _image(size: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.randn(1, 3, size, size)


def _tokens(batch: int, seq: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.randint(0, VOCAB, (batch, seq))


# The first five are the original benchmark models: their definitions, seeds and export settings must not
# change, or benchmark figures stop being comparable. The *_dyn ones share their weights (same seed) and keep
# batch and spatial / sequence dims symbolic, for plan v2 (run-time shapes).
MODELS: dict[str, Spec] = {
    'cifar10net': Spec(CIFAR10Net, _image(32), 'image', 'logits', BATCH, BATCH),
    'cifar10net_unfused': Spec(CIFAR10Net, _image(32), 'image', 'logits', BATCH, BATCH, unfused=True),
    'mobilenetv2': Spec(MobileNetV2, _image(224), 'input', 'output', BATCH, BATCH),
    'resnet18': Spec(ResNet18, _image(224), 'input', 'output', BATCH, BATCH),
    'minilm_like': Spec(MiniLMLike, _tokens(1, 128), 'input_ids', 'embedding'),
    'resnet18_dyn': Spec(ResNet18, _image(224), 'input', 'output', IMAGE_DYN, BATCH),
    'mobilenetv2_dyn': Spec(MobileNetV2, _image(224), 'input', 'output', IMAGE_DYN, BATCH),
    # traced at batch 2: a size-1 example dim invites broadcasting shortcuts that would not hold at other sizes
    'minilm_like_dyn': Spec(minilm_explicit, _tokens(2, 16), 'input_ids', 'embedding', TOKENS_DYN, BATCH),
}
ORIGINALS = ('cifar10net', 'cifar10net_unfused', 'mobilenetv2', 'resnet18', 'minilm_like')
