"""Sentence encoders with all-MiniLM-L6 dimensions (6 layers, d=384, 12 heads, ff=1536, 8192-token vocabulary).

MiniLMLike is the original benchmark model (nn.TransformerEncoderLayer). The legacy exporter bakes the example
sequence length into the Reshapes nn.MultiheadAttention emits, so it only runs at that length. MiniLMExplicit is
the same function written out (q/k/v Linear, heads reshaped with sizes read from the tensor's shape at run time):
its graph keeps batch and sequence symbolic. Built from a MiniLMLike, it carries the same weights.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

D, HEADS, LAYERS, FF, VOCAB, MAX_POS = 384, 12, 6, 1536, 8192, 512


class MiniLMLike(nn.Module):
    def __init__(self, d: int = D, heads: int = HEADS, layers: int = LAYERS, ff: int = FF, vocab: int = VOCAB) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(MAX_POS, d)
        self.ln = nn.LayerNorm(d)
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(d, heads, ff, activation='gelu', batch_first=True,
                                                                dropout=0.0) for _ in range(layers)])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.ln(self.emb(ids) + self.pos(torch.arange(ids.shape[1]).unsqueeze(0)))
        for layer in self.layers:
            x = layer(x)
        return x.mean(1)


class EncoderLayer(nn.Module):
    """nn.TransformerEncoderLayer(norm_first=False, activation='gelu', dropout=0) with every step explicit."""

    def __init__(self, d: int, heads: int, ff: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.q, self.k, self.v, self.out = (nn.Linear(d, d) for _ in range(4))
        self.linear1, self.linear2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.norm1, self.norm2 = nn.LayerNorm(d, eps), nn.LayerNorm(d, eps)

    @classmethod
    def from_reference(cls, ref: nn.TransformerEncoderLayer) -> EncoderLayer:
        att = ref.self_attn
        layer = cls(att.embed_dim, att.num_heads, ref.linear1.out_features, ref.norm1.eps)
        # in_proj holds q, k, v stacked along the output dim
        for lin, w, b in zip((layer.q, layer.k, layer.v), att.in_proj_weight.chunk(3), att.in_proj_bias.chunk(3)):
            lin.weight.data.copy_(w)
            lin.bias.data.copy_(b)
        for mine, theirs in ((layer.out, att.out_proj), (layer.linear1, ref.linear1), (layer.linear2, ref.linear2),
                             (layer.norm1, ref.norm1), (layer.norm2, ref.norm2)):
            mine.load_state_dict(theirs.state_dict())
        return layer

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        # Sizes read from the shape at run time: the exporter emits Shape/Gather, not the example's numbers.
        b, s = x.shape[0], x.shape[1]

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(b, s, self.heads, self.dh).transpose(1, 2)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        # a Python float scale is one constant Mul (F.scaled_dot_product_attention adds Shape/Sqrt/Div)
        p = F.softmax(torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(self.dh)), dim=-1)
        o = torch.matmul(p, v).transpose(1, 2).reshape(b, s, self.heads * self.dh)
        return self.out(o)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.linear2(F.gelu(self.linear1(x))))


class MiniLMExplicit(nn.Module):
    def __init__(self, ref: MiniLMLike) -> None:
        super().__init__()
        self.emb, self.pos, self.ln = ref.emb, ref.pos, ref.ln
        self.layers = nn.ModuleList([EncoderLayer.from_reference(layer) for layer in ref.layers])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.ln(self.emb(ids) + self.pos(torch.arange(ids.shape[1]).unsqueeze(0)))
        for layer in self.layers:
            x = layer(x)
        return x.mean(1)


def minilm_explicit() -> MiniLMExplicit:
    """Seeded by the caller like the others: the weights of the MiniLMLike built from the same seed."""
    return MiniLMExplicit(MiniLMLike())
