"""The benchmark zoo (issue: speed on the models users bring): the architectures people deploy, built from
torchvision, timm and transformers definitions with seeded random weights (no download beyond PyPI
packages), plus a CRNN with an LSTM head and a YOLO-style detector written here. Static shapes, batch 1.

    python3 -m bench.models OUTDIR zoo        (all of them; or name them)

Needs the `zoo` extra (pip install -e '.[zoo]': torchvision, timm, transformers); bench/zoo.py installs it."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F


def _torchvision():
    """torchvision's models. The PyPI wheel is built for CUDA torch: on a CPU-only torch its compiled ops
    (nms, roi_align) do not load, and registering their fake kernels fails at import. The classification
    models are plain Python and never call them: skip those registrations while importing."""
    import torch.library as lib
    real = lib.register_fake

    def tolerant(op, *a, **k):
        if isinstance(op, str) and op.startswith("torchvision::"):
            return lambda fn: fn
        return real(op, *a, **k)
    lib.register_fake = tolerant
    try:
        import torchvision
    finally:
        lib.register_fake = real
    return torchvision.models


def _transformers():
    _torchvision()   # transformers imports torchvision (image processors) when it is installed
    import transformers
    return transformers


def tv(name: str, **kw) -> Callable[[], nn.Module]:
    return lambda: getattr(_torchvision(), name)(weights=None, **kw)


def timm_model(name: str) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        _torchvision()   # timm imports torchvision
        import timm
        return timm.create_model(name, pretrained=False)
    return build


class HiddenStates(nn.Module):
    """A transformers model as a module returning one tensor (what an embedding or classifier consumes)."""

    def __init__(self, model: nn.Module, key: str = "last_hidden_state") -> None:
        super().__init__()
        self.model, self.key = model, key

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return getattr(self.model(x), self.key)


def bert(layers: int, hidden: int, heads: int, ff: int) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        tf = _transformers()
        cfg = tf.BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                            intermediate_size=ff, attn_implementation="eager")
        return HiddenStates(tf.BertModel(cfg))
    return build


def distilbert() -> nn.Module:
    tf = _transformers()
    return HiddenStates(tf.DistilBertModel(tf.DistilBertConfig(attn_implementation="eager")))


def vit_small() -> nn.Module:
    tf = _transformers()
    cfg = tf.ViTConfig(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536,
                       attn_implementation="eager")
    return HiddenStates(tf.ViTModel(cfg, add_pooling_layer=False))


def whisper_tiny_encoder() -> nn.Module:
    tf = _transformers()
    cfg = tf.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6, decoder_layers=4,
                           decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536, num_mel_bins=80,
                           attn_implementation="eager")
    return HiddenStates(tf.WhisperModel(cfg).get_encoder())


GPT2_PAST = 127


class GPT2Step(nn.Module):
    """One decoding step of a GPT-2-small-sized model: the next token's logits from one new token and the
    keys/values of the GPT2_PAST tokens before it (stacked: [layers, 2, 1, heads, past, head_dim])."""

    def __init__(self) -> None:
        super().__init__()
        tf = _transformers()
        self.cfg = tf.GPT2Config(attn_implementation="eager")
        self.model = tf.GPT2LMHeadModel(self.cfg)

    def forward(self, input_ids: torch.Tensor, past: torch.Tensor) -> torch.Tensor:
        cache = _transformers().DynamicCache()
        for i in range(self.cfg.n_layer):
            cache.update(past[i, 0], past[i, 1], i)
        return self.model(input_ids, past_key_values=cache, use_cache=False).logits


def gpt2_step_example() -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.randint(0, 50257, (1, 1)), torch.randn(12, 2, 1, 12, GPT2_PAST, 64))


class CRNN(nn.Module):
    """A text-line recognizer: conv feature extractor over a 32x128 grey line, columns as a sequence,
    a bidirectional LSTM, per-column class logits (CTC-style, 37 classes)."""

    def __init__(self, classes: int = 37) -> None:
        super().__init__()

        def block(cin: int, cout: int, pool: tuple[int, int] | None) -> list[nn.Module]:
            layers: list[nn.Module] = [nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]
            return layers + ([nn.MaxPool2d(pool, pool)] if pool else [])
        self.features = nn.Sequential(*block(1, 64, (2, 2)), *block(64, 128, (2, 2)), *block(128, 256, None),
                                      *block(256, 256, (2, 1)), *block(256, 256, (2, 1)), *block(256, 256, (2, 1)))
        self.lstm = nn.LSTM(256, 128, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(256, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.features(x)                         # [1, 256, 1, 32]
        seq = f.squeeze(2).permute(0, 2, 1)          # [1, 32, 256]
        y, _ = self.lstm(seq)
        return self.head(y)


def _cbs(cin: int, cout: int, k: int = 1, s: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())


class C2f(nn.Module):
    def __init__(self, cin: int, cout: int, n: int, shortcut: bool) -> None:
        super().__init__()
        self.c = cout // 2
        self.cv1, self.cv2 = _cbs(cin, 2 * self.c), _cbs((2 + n) * self.c, cout)
        self.m = nn.ModuleList(nn.Sequential(_cbs(self.c, self.c, 3), _cbs(self.c, self.c, 3)) for _ in range(n))
        self.shortcut = shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = list(self.cv1(x).split((self.c, self.c), 1))
        for m in self.m:
            y.append(y[-1] + m(y[-1]) if self.shortcut else m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.cv1, self.cv2 = _cbs(c, c // 2), _cbs(c * 2, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.cv1(x)
        y1 = F.max_pool2d(x, 5, 1, 2)
        y2 = F.max_pool2d(y1, 5, 1, 2)
        return self.cv2(torch.cat([x, y1, y2, F.max_pool2d(y2, 5, 1, 2)], 1))


class YoloLike(nn.Module):
    """A YOLOv8n-sized detector at 320x320: CSP backbone (C2f), SPPF, upsample/concat neck (PAN),
    decoupled box/class heads at three strides, outputs concatenated as [1, 4 + 80, anchors]."""

    def __init__(self, classes: int = 80) -> None:
        super().__init__()
        w = (16, 32, 64, 128, 256)
        self.stem = nn.Sequential(_cbs(3, w[0], 3, 2), _cbs(w[0], w[1], 3, 2), C2f(w[1], w[1], 1, True))
        self.p3 = nn.Sequential(_cbs(w[1], w[2], 3, 2), C2f(w[2], w[2], 2, True))
        self.p4 = nn.Sequential(_cbs(w[2], w[3], 3, 2), C2f(w[3], w[3], 2, True))
        self.p5 = nn.Sequential(_cbs(w[3], w[4], 3, 2), C2f(w[4], w[4], 1, True), SPPF(w[4]))
        self.up4, self.up3 = C2f(w[4] + w[3], w[3], 1, False), C2f(w[3] + w[2], w[2], 1, False)
        self.down4, self.pan4 = _cbs(w[2], w[2], 3, 2), C2f(w[2] + w[3], w[3], 1, False)
        self.down5, self.pan5 = _cbs(w[3], w[3], 3, 2), C2f(w[3] + w[4], w[4], 1, False)
        self.box = nn.ModuleList(nn.Sequential(_cbs(c, 64, 3), _cbs(64, 64, 3), nn.Conv2d(64, 64, 1)) for c in w[2:])
        self.cls = nn.ModuleList(nn.Sequential(_cbs(c, 80, 3), _cbs(80, 80, 3), nn.Conv2d(80, classes, 1)) for c in w[2:])
        self.register_buffer("bins", torch.arange(16, dtype=torch.float32).view(1, 16, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p3 = self.p3(self.stem(x))
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        n4 = self.up4(torch.cat([F.interpolate(p5, scale_factor=2.0, mode="nearest"), p4], 1))
        n3 = self.up3(torch.cat([F.interpolate(n4, scale_factor=2.0, mode="nearest"), p3], 1))
        n4 = self.pan4(torch.cat([self.down4(n3), n4], 1))
        n5 = self.pan5(torch.cat([self.down5(n4), p5], 1))
        outs = []
        for f, box, cls in zip((n3, n4, n5), self.box, self.cls):
            b = box(f)                                                  # [1, 4*16, h, w]: distribution focal loss bins
            b = b.view(1, 4, 16, -1).softmax(2)
            b = (b * self.bins.view(1, 1, 16, 1)).sum(2)                # expected distance per side
            outs.append(torch.cat([b, cls(f).flatten(2).sigmoid()], 1))
        return torch.cat(outs, 2)
