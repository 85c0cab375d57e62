"""A small decoder-only transformer over characters, whose attention is a function passed in.

train_char_model.py builds it twice from the same weights: once with torch's
scaled_dot_product_attention, once with flashlab's attention. Nothing else differs, so any
gap between the two loss curves comes from the attention's forward and backward.

Per layer (pre-LayerNorm): x = x + Wo attention(Wq x, Wk x, Wv x), then x = x + MLP(x) with a
hidden width of 4 d_model. Parameters per layer: 2 (H + H_kv) d d_model for Wq, Wk, Wv and
Wo, plus 8 d_model^2 for the MLP (biases and LayerNorms aside). A training step costs about
6 FLOPs per parameter per token for the matrix products, plus the attention's own
3.5 x 4 B H N^2 d / 2 (causal forward and backward) per layer.
"""
import torch
import torch.nn.functional as F
from torch import nn

MLP_WIDTH = 4  # the MLP's hidden width, in multiples of d_model (as in GPT-2)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention; kv_heads < heads shares each K/V head among
    heads / kv_heads query heads (GQA)."""

    def __init__(self, d_model, heads, kv_heads, attention):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, d_model // heads
        self.wq = nn.Linear(d_model, heads * self.d, bias=False)
        self.wkv = nn.Linear(d_model, 2 * kv_heads * self.d, bias=False)
        self.wo = nn.Linear(heads * self.d, d_model, bias=False)
        self.attention = attention  # (q, k, v) -> O, causal, default scale 1/sqrt(d)

    def forward(self, x):  # x: (B, N, d_model)
        B, N, _ = x.shape
        # Views, not copies: the head dimension d stays contiguous, the other three strides
        # are whatever the projection's layout gives, and both attentions take them as is.
        q = self.wq(x).view(B, N, self.heads, self.d).transpose(1, 2)  # (B, H, N, d)
        k, v = self.wkv(x).view(B, N, 2, self.kv_heads, self.d).unbind(2)  # (B, N, H_kv, d)
        o = self.attention(q, k.transpose(1, 2), v.transpose(1, 2))  # (B, H, N, d)
        return self.wo(o.transpose(1, 2).reshape(B, N, self.heads * self.d))  # (B, N, d_model)


class Block(nn.Module):
    def __init__(self, d_model, heads, kv_heads, attention):
        super().__init__()
        self.ln_attention = nn.LayerNorm(d_model)
        self.attention = CausalSelfAttention(d_model, heads, kv_heads, attention)
        self.ln_mlp = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, MLP_WIDTH * d_model), nn.GELU(),
                                 nn.Linear(MLP_WIDTH * d_model, d_model))

    def forward(self, x):  # x: (B, N, d_model)
        x = x + self.attention(self.ln_attention(x))
        return x + self.mlp(self.ln_mlp(x))


class CharTransformer(nn.Module):
    """Token and position embeddings, `layers` blocks, a final LayerNorm and a linear head
    that scores every character of the vocabulary at every position."""

    def __init__(self, vocab_size, context, d_model, layers, heads, kv_heads, attention):
        super().__init__()
        self.token = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(
            Block(d_model, heads, kv_heads, attention) for _ in range(layers))
        self.ln_final = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, ids, targets):  # ids, targets: (B, N) character ids
        positions = torch.arange(ids.shape[1], device=ids.device)  # (N,)
        x = self.token(ids) + self.position(positions)  # (B, N, d_model)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_final(x))  # (B, N, vocab)
        # The mean cross-entropy of the next character, in fp32 whatever the logits' dtype.
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


def sdpa_attention(kv_heads_differ):
    """torch's attention, causal (top-left; with N_q = N_k both alignments are the same)."""
    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                              enable_gqa=kv_heads_differ)
    return attention
