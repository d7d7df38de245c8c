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
    example: Callable[[], torch.Tensor | tuple[torch.Tensor, ...]]   # the traced input(s) (values do not reach the graph)
    input: str | tuple[str, ...]
    output: str
    input_axes: dict[int, str] = field(default_factory=dict)    # symbolic dims of the input ({}: all static)
    output_axes: dict[int, str] = field(default_factory=dict)
    unfused: bool = False                       # no constant folding, BatchNormalization kept in the graph

    def input_names(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else list(self.input)

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


def _zoo() -> dict[str, Spec]:
    """The benchmark zoo (bench/models/zoo.py, docs/models.md): static shapes, batch 1."""
    from . import zoo as z
    img = _image(224)
    tok = lambda n: (lambda: torch.randint(0, 30000, (1, n)))  # noqa: E731
    specs = {
        'mobilenet_v3_small': Spec(z.tv('mobilenet_v3_small'), img, 'input', 'output'),
        'mobilenet_v3_large': Spec(z.tv('mobilenet_v3_large'), img, 'input', 'output'),
        'efficientnet_b0': Spec(z.tv('efficientnet_b0'), img, 'input', 'output'),
        'regnet_y_400mf': Spec(z.tv('regnet_y_400mf'), img, 'input', 'output'),
        'shufflenet_v2': Spec(z.tv('shufflenet_v2_x1_0'), img, 'input', 'output'),
        'squeezenet': Spec(z.tv('squeezenet1_1'), img, 'input', 'output'),
        'densenet121': Spec(z.tv('densenet121'), img, 'input', 'output'),
        'googlenet': Spec(z.tv('googlenet', aux_logits=False, init_weights=True), img, 'input', 'output'),
        'mnasnet': Spec(z.tv('mnasnet1_0'), img, 'input', 'output'),
        'resnet50': Spec(z.tv('resnet50'), img, 'input', 'output'),
        'convnext_tiny': Spec(z.tv('convnext_tiny'), img, 'input', 'output'),
        'lcnet': Spec(z.timm_model('lcnet_100'), img, 'input', 'output'),
        'ghostnet': Spec(z.timm_model('ghostnet_100'), img, 'input', 'output'),
        'mobilevit': Spec(z.timm_model('mobilevit_xs'), _image(256), 'input', 'output'),
        'efficientformer': Spec(z.timm_model('efficientformer_l1'), img, 'input', 'output'),
        'repvgg': Spec(z.timm_model('repvgg_a0'), img, 'input', 'output'),
        'deit_tiny': Spec(z.timm_model('deit_tiny_patch16_224'), img, 'input', 'output'),
        'bert_base': Spec(z.bert(12, 768, 12, 3072), tok(128), 'input_ids', 'hidden'),
        'distilbert': Spec(z.distilbert, tok(128), 'input_ids', 'hidden'),
        'vit_small': Spec(z.vit_small, img, 'input', 'hidden'),
        'whisper_tiny_encoder': Spec(z.whisper_tiny_encoder, lambda: torch.randn(1, 80, 3000), 'input_features', 'hidden'),
        'gpt2_step': Spec(z.GPT2Step, z.gpt2_step_example, ('input_ids', 'past'), 'logits'),
        'crnn_lstm': Spec(z.CRNN, lambda: torch.randn(1, 1, 32, 128), 'image', 'logits'),
        'yolo_like': Spec(z.YoloLike, _image(320), 'image', 'detections'),
    }
    from . import masked
    specs['minilm_l6_masked'] = Spec(masked.MaskedMiniLM, masked.example, ('input_ids', 'attention_mask'), 'hidden')
    return specs


ZOO_NAMES = ('mobilenet_v3_small', 'mobilenet_v3_large', 'efficientnet_b0', 'regnet_y_400mf', 'shufflenet_v2',
             'squeezenet', 'densenet121', 'googlenet', 'mnasnet', 'resnet50', 'convnext_tiny', 'lcnet', 'ghostnet',
             'mobilevit', 'efficientformer', 'repvgg', 'deit_tiny', 'bert_base', 'distilbert', 'vit_small',
             'whisper_tiny_encoder', 'gpt2_step', 'crnn_lstm', 'yolo_like')
# built like the zoo's, not benchmarked with it: bench/models/masked.py (masked attention's A/B model)
EXTRA_NAMES = ('minilm_l6_masked',)


def spec(name: str) -> Spec:
    """A registered model: the core models, or one of the zoo (whose definitions need the zoo extra)."""
    if name in MODELS:
        return MODELS[name]
    if name in ZOO_NAMES or name in EXTRA_NAMES:
        return _zoo()[name]
    raise KeyError(name)
