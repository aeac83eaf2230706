"""Transformer building blocks (Vaswani et al., 2017, "Attention Is All You Need").

Attention runs through ``torch.nn.functional.scaled_dot_product_attention``. Shapes use
B batch, S source length, T target length, D model width, H heads, Dh = D / H.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


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


@dataclass
class DecoderCache:
    """Incremental decoding state for a whole decoder stack.

    Self-attention keys/values are preallocated for ``max_len`` steps and filled one step at a
    time; cross-attention keys/values are computed once per source sentence. With ``group`` > 1,
    each run of ``group`` adjacent rows (one sentence's beams) shares one source row: the beams
    attend to their source together, as ``group`` query positions over one copy of its keys.
    """

    self_k: Tensor  # (L, R, H, max_len, Dh), R rows being decoded
    self_v: Tensor  # (L, R, H, max_len, Dh)
    cross_k: Tensor  # (L, R / group, H, S, Dh)
    cross_v: Tensor  # (L, R / group, H, S, Dh)
    src_keep: Tensor | None  # (R / group, 1, 1, S) bool, True where the source is a real token
    length: int = 0  # steps decoded so far
    spare: tuple[Tensor, Tensor] | None = None  # buffers shaped like self_k/self_v, see reorder
    group: int = 1  # adjacent rows per source row

    def reorder(self, index: Tensor, sources: Tensor | None = None) -> None:
        """Select/reorder rows (beam reordering, finished sentences leaving the batch).

        ``index`` (R',) picks the rows' self-attention state. ``sources`` picks source rows
        when rows do not map one to one onto sources (default: ``index``, one row per source);
        each of them is then shared by ``R' / len(sources)`` adjacent rows.
        """
        sources = index if sources is None else sources
        if len(index) % len(sources):
            raise ValueError(f"{len(index)} rows cannot share {len(sources)} sources evenly")
        self.reorder_self(index)
        self.reorder_source(sources)
        self.group = len(index) // len(sources)

    def reorder_source(self, index: Tensor) -> None:
        """Select rows of the source-side state only (cross keys/values and mask)."""
        self.cross_k = self.cross_k.index_select(1, index)
        self.cross_v = self.cross_v.index_select(1, index)
        if self.src_keep is not None:
            self.src_keep = self.src_keep.index_select(0, index)

    def reorder_self(self, index: Tensor) -> None:
        """Reorder only the self-attention state: for beam moves within each source's beams.

        With the batch size unchanged (beam moves, every step of beam search) the filled steps
        are gathered straight into a spare pair of buffers, which then swap with the current
        ones: one copy per step and no allocation. A new batch size gets new buffers.
        """
        if len(index) != self.self_k.shape[1]:
            self.self_k = _select_prefix(self.self_k, index, self.length)
            self.self_v = _select_prefix(self.self_v, index, self.length)
            self.spare = None
            return
        if self.spare is None:
            self.spare = (torch.empty_like(self.self_k), torch.empty_like(self.self_v))
        k, v, n = *self.spare, self.length
        torch.index_select(self.self_k[:, :, :, :n], 1, index, out=k[:, :, :, :n])
        torch.index_select(self.self_v[:, :, :, :n], 1, index, out=v[:, :, :, :n])
        self.spare = (self.self_k, self.self_v)
        self.self_k, self.self_v = k, v


def _select_prefix(buffer: Tensor, index: Tensor, length: int) -> Tensor:
    """Rows ``index`` of a (L, B, H, max_len, Dh) buffer in a new buffer, copying only the
    filled steps."""
    out = buffer.new_empty((buffer.shape[0], len(index), *buffer.shape[2:]))
    if length:
        out[:, :, :, :length] = buffer[:, :, :, :length].index_select(1, index)
    return out


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

    def step(self, x: Tensor, cache: DecoderCache, layer: int) -> Tensor:
        """One decoding step: x (B, 1, D); appends this step's key/value to the cache."""
        q, k, v = (split_heads(t, self.heads) for t in self.qkv(x).chunk(3, dim=-1))
        t = cache.length
        cache.self_k[layer, :, :, t : t + 1] = k
        cache.self_v[layer, :, :, t : t + 1] = v
        keys, values = cache.self_k[layer, :, :, : t + 1], cache.self_v[layer, :, :, : t + 1]
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

    def memory_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of the encoder memory, (B, H, S, Dh) each."""
        k, v = self.kv(memory).chunk(2, dim=-1)
        return split_heads(k, self.heads), split_heads(v, self.heads)

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
