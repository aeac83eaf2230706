"""Transformer building blocks (Vaswani et al., 2017, "Attention Is All You Need").

Attention runs through ``torch.nn.functional.scaled_dot_product_attention``. Shapes use
B batch, S source length, T target length, D model width, H heads, Dh = D / H.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.model.state import KeyValueCache, SourceCache


def sinusoidal_positions(max_positions: int, dim: int) -> Tensor:
    """Sinusoidal position table (max_positions, dim): sines in the first half, cosines in the
    second (the tensor2tensor/Marian layout, a fixed permutation of the paper's interleaving).

    >>> sinusoidal_positions(4, 4)[1].tolist()  # doctest: +ELLIPSIS
    [0.841..., 0.0099..., 0.540..., 0.9999...]
    """
    half = dim // 2
    # frequency i is 10000^(-2i/dim), as in the paper
    freqs = torch.exp(torch.arange(half, dtype=torch.float64) * -(math.log(10000.0) / half))
    angles = torch.arange(max_positions, dtype=torch.float64)[:, None] * freqs[None, :]
    table = torch.zeros(max_positions, dim, dtype=torch.float64)
    table[:, :half] = torch.sin(angles)
    table[:, half : 2 * half] = torch.cos(angles)
    return table.float()


def split_heads(x: Tensor, heads: int) -> Tensor:
    """(B, T, D) -> (B, H, T, Dh)."""
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(B, H, T, Dh) -> (B, T, D)."""
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


class SelfAttention(nn.Module):
    """Multi-head self-attention with a fused QKV projection."""

    def __init__(self, d_model: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, keep: Tensor | None = None, causal: bool = False) -> Tensor:
        q, k, v = (split_heads(t, self.heads) for t in self.qkv(x).chunk(3, dim=-1))
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p, is_causal=causal)
        return self.out(merge_heads(y))

    def start(self, like: Tensor, rows: int, max_len: int) -> KeyValueCache:
        """An empty cache for ``rows`` rows and up to ``max_len`` steps."""
        dim = self.qkv.in_features // self.heads
        return KeyValueCache.empty(like, rows, self.heads, max_len, dim)

    def step(self, x: Tensor, cache: KeyValueCache) -> Tensor:
        """One decoding step: x (R, 1, D); appends this step's key/value to the cache."""
        q, k, v = (split_heads(t, self.heads) for t in self.qkv(x).chunk(3, dim=-1))
        keys, values = cache.append(k, v)  # (R, H, t + 1, Dh) each
        y = F.scaled_dot_product_attention(q, keys, values)
        return self.out(merge_heads(y))


class CrossAttention(nn.Module):
    """Multi-head attention from decoder states to the encoder memory."""

    def __init__(self, d_model: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.q = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def memory_kv(self, memory: Tensor) -> SourceCache:
        """Keys and values of the encoder memory, (B, H, S, Dh) each."""
        k, v = self.kv(memory).chunk(2, dim=-1)
        return SourceCache(split_heads(k, self.heads), split_heads(v, self.heads))

    def forward(
        self, x: Tensor, k: Tensor, v: Tensor, keep: Tensor | None
    ) -> Tensor:  # x (B, T, D)
        q = split_heads(self.q(x), self.heads)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p)
        return self.out(merge_heads(y))


class FeedForward(nn.Module):
    """Position-wise ReLU feed-forward network."""

    def __init__(self, d_model: int, ffn_dim: int, activation_dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, d_model)
        self.activation_dropout = nn.Dropout(activation_dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.activation_dropout(F.relu(self.fc1(x))))


class Residual(nn.Module):
    """x + dropout(sublayer(x)) with post-LN (norm after the sum) or pre-LN (norm before)."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def before(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.pre_norm else x

    def after(self, x: Tensor, y: Tensor) -> Tensor:
        out = x + self.dropout(y)
        return out if self.pre_norm else self.norm(out)
