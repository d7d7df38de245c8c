"""A sentence-embedding BERT as users export it (all-MiniLM-L6-v2's shape: 6 layers, hidden 384, 12 heads, sequence
128; random weights): `input_ids` and `attention_mask` graph inputs, so the padding mask reaches each attention
block as (1 - mask) * lowest added to the scores, computed at run time (ATTENTION's mask input, docs/transformer.md
session 16). Not part of the zoo: the A/B model for masked attention."""
from __future__ import annotations

import torch
import torch.nn as nn

SEQ = 128


class MaskedMiniLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from .zoo import _transformers
        tf = _transformers()
        cfg = tf.BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                            intermediate_size=1536, attn_implementation="eager")
        self.model = tf.BertModel(cfg, add_pooling_layer=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def example() -> tuple[torch.Tensor, torch.Tensor]:
    mask = torch.ones(1, SEQ, dtype=torch.int64)
    mask[0, SEQ - 32:] = 0   # traced values do not reach the graph; a padded example all the same
    return torch.randint(0, 30000, (1, SEQ)), mask
