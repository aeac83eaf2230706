"""Transformer building blocks (Vaswani et al., 2017, "Attention Is All You Need"): attention
with grouped-query keys/values, and the residual connection with its norm.

Attention runs through ``torch.nn.functional.scaled_dot_product_attention``. Shapes use
B batch, S source length, T target length, D model width, H heads, Hkv key/value heads
(Hkv = H, or a divisor of it), Dh = D / H.

Modules receive built parts (a norm, an attention-time position scheme), never config flags;
:mod:`mtkit.model.builders` is where config names become parts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.model.state import KeyValueCache, SourceCache

if TYPE_CHECKING:
    from mtkit.model.positions import AttentionPositions


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
    """(B, T, heads * Dh) -> (B, heads, T, Dh)."""
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(B, H, T, Dh) -> (B, T, D)."""
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
) -> Tensor:
    """softmax(q k^T / sqrt(Dh) + mask) v: q (B, H, Tq, Dh), k/v (B, Hkv, Tk, Dh) -> (B, H, Tq, Dh).

    With Hkv < H (grouped-query attention, Ainslie et al. 2023), query head h reads key/value
    head h // (H / Hkv). Where the mask is the same for every head and query (None, or a
    (B, 1, 1, Tk) padding mask: cached decoding steps and cross-attention), each group of
    H / Hkv query heads becomes H / Hkv times as many queries of its key/value head, so keys
    and values are never copied (measured faster on CPU than SDPA's ``enable_gqa``, which is
    used for the remaining cases: causal or per-head masks).
    """
    if written_out(q, dropout_p, is_causal):
        return _written_out(q, k, v, mask)
    h, hkv = q.shape[-3], k.shape[-3]
    if h == hkv:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal
        )
    same_for_all = mask is None or (mask.dim() == 4 and mask.shape[1] == mask.shape[2] == 1)
    if same_for_all and not is_causal:
        b, _, t_q, dh = q.shape
        folded = q.reshape(b, hkv, (h // hkv) * t_q, dh)  # (B, Hkv, H/Hkv * Tq, Dh)
        y = F.scaled_dot_product_attention(folded, k, v, attn_mask=mask, dropout_p=dropout_p)
        return y.view(b, h, t_q, dh)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, enable_gqa=True
    )


COMPILED_QUERIES = 16  # at most this many queries: a compiled graph computes attention itself


def written_out(q: Tensor, dropout_p: float, is_causal: bool) -> bool:
    """Whether :func:`attention` is written out instead of calling SDPA: inside a compiled
    graph (``--compile``'s decoding step: a few queries over a few keys, no dropout), where
    inductor fuses products and sums into a loop or two instead of calling SDPA's kernel
    (~0.9 ms a call at 160 rows x 16 keys on one AVX2 core, the loops a fraction of it)."""
    few = q.shape[-2] <= COMPILED_QUERIES and not dropout_p and not is_causal
    return few and torch.compiler.is_compiling()


def _written_out(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """softmax(q k^T / sqrt(Dh) + mask) v as broadcast products and sums (SDPA's values to
    float32 rounding); grouped-query heads by broadcasting over a split head dimension, with
    no reshape that a graph would have to guard (query head h reads key/value head
    h // (H / Hkv))."""
    h, hkv, dh = q.shape[-3], k.shape[-3], q.shape[-1]
    q = q.unflatten(-3, (hkv, h // hkv))  # (B, Hkv, H/Hkv, Tq, Dh)
    k, v = k.unsqueeze(-3), v.unsqueeze(-3)  # (B, Hkv, 1, Tk, Dh)
    scores = (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1) * dh**-0.5  # (B, Hkv, H/Hkv, Tq, Tk)
    if mask is not None:  # (..., 1 or H, 1 or Tq, Tk)
        per_head = mask.dim() >= 3 and mask.shape[-3] == h
        mask = mask.unflatten(-3, (hkv, h // hkv)) if per_head else mask.unsqueeze(-3)
        scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask
    out = (scores.softmax(-1).unsqueeze(-1) * v.unsqueeze(-3)).sum(-2)  # (B, Hkv, H/Hkv, Tq, Dh)
    return out.flatten(-4, -3)


def init_like(linear: nn.Linear, fan_out: int) -> None:
    """Have the model's Xavier-uniform initialisation draw ``linear`` as if it had ``fan_out``
    outputs: grouped-query projections get the scale of the full-head projections they replace,
    so that the variants differ from the baseline in the number of key/value heads only (with
    their own, smaller fan-out, multi-query keys start ~1.8x and queries ~1.4x larger)."""
    linear.init_fan_out = fan_out  # read by Transformer.reset_parameters


class SelfAttention(nn.Module):
    """Multi-head self-attention with ``kv_heads`` key/value heads (= ``heads``: today's fused
    ``qkv`` projection; fewer: ``q`` and ``kv`` projections, grouped-query attention, Ainslie
    et al. 2023, multi-query at 1, Shazeer 2019) and an attention-time position scheme, which
    rotates queries/keys before keys are cached and computes the attention. ``causal``: each
    position attends to itself and earlier ones only (the decoder's)."""

    def __init__(
        self,
        d_model: int,
        heads: int,
        kv_heads: int,
        dropout: float,
        bias: bool,
        positions: AttentionPositions,
        causal: bool = False,
    ) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d_model // heads
        self.dropout = dropout
        self.causal = causal
        if kv_heads == heads:
            self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        else:
            self.q = nn.Linear(d_model, d_model, bias=bias)
            self.kv = nn.Linear(d_model, 2 * kv_heads * self.head_dim, bias=bias)
            init_like(self.q, 3 * d_model)  # drawn as the fused qkv's would be
            init_like(self.kv, 3 * d_model)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.positions = positions

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, D) -> q (B, H, T, Dh), k and v (B, Hkv, T, Dh)."""
        if self.kv_heads == self.heads:
            q, k, v = (split_heads(t, self.heads) for t in self.qkv(x).chunk(3, dim=-1))
            return q, k, v
        k, v = (split_heads(t, self.kv_heads) for t in self.kv(x).chunk(2, dim=-1))
        return split_heads(self.q(x), self.heads), k, v

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        """x (B, T, D); keep (B, 1, 1, T) bool, True at real tokens, or None."""
        q, k, v = self.project(x)
        q, k = self.positions.rotate(q, 0), self.positions.rotate(k, 0)
        y = self.positions.attend(
            q, k, v, keep, self.dropout, self.training, causal=self.causal, q_offset=0
        )
        return self.out(merge_heads(y))

    def start(self, like: Tensor, rows: int, max_len: int) -> KeyValueCache:
        """An empty cache of Hkv heads for ``rows`` rows and up to ``max_len`` steps."""
        return KeyValueCache.empty(like, rows, self.kv_heads, max_len, self.head_dim)

    def step(self, x: Tensor, cache: KeyValueCache) -> Tensor:
        """One decoding step at position t = cache.length: x (R, 1, D); the rotated key and the
        value are appended to the cache, and the query attends to all t + 1 of them (no mask:
        none lies in its future)."""
        t = cache.length
        q, k, v = self.project(x)
        q, k = self.positions.rotate(q, t), self.positions.rotate(k, t)
        keys, values = cache.append(k, v)  # (R, Hkv, t + 1, Dh) each
        y = self.positions.attend(q, keys, values, q_offset=t)
        return self.out(merge_heads(y))

    def steps(self, x: Tensor, cache: KeyValueCache) -> Tensor:
        """n decoding steps at once at positions t..t+n-1, t = cache.length (speculative
        decoding's check of proposed tokens): x (R, n, D); the n keys/values are appended and
        each query attends causally to the t + 1.. t + n keys up to its own position."""
        t, n = cache.length, x.shape[1]
        q, k, v = self.project(x)
        q, k = self.positions.rotate(q, t), self.positions.rotate(k, t)
        keys, values = cache.append(k, v)  # (R, Hkv, t + n, Dh) each
        y = self.positions.attend(q, keys, values, causal=n > 1, q_offset=t)
        return self.out(merge_heads(y))


class CrossAttention(nn.Module):
    """Multi-head attention from decoder states to the encoder memory, with ``kv_heads``
    key/value heads (module names ``q``, ``kv``, ``out`` for any count). No positions."""

    def __init__(self, d_model: int, heads: int, kv_heads: int, dropout: float, bias: bool) -> None:
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        self.dropout = dropout
        self.q = nn.Linear(d_model, d_model, bias=bias)
        self.kv = nn.Linear(d_model, 2 * kv_heads * (d_model // heads), bias=bias)
        if kv_heads != heads:
            init_like(self.kv, 2 * d_model)  # drawn as the full-head kv's would be
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def memory_kv(self, memory: Tensor) -> SourceCache:
        """Keys and values of the encoder memory, (B, Hkv, S, Dh) each."""
        k, v = self.kv(memory).chunk(2, dim=-1)
        return SourceCache(split_heads(k, self.kv_heads), split_heads(v, self.kv_heads))

    def forward(
        self, x: Tensor, k: Tensor, v: Tensor, keep: Tensor | None
    ) -> Tensor:  # x (B, T, D)
        q = split_heads(self.q(x), self.heads)
        p = self.dropout if self.training else 0.0
        return self.out(merge_heads(attention(q, k, v, keep, p)))

    def with_probabilities(
        self, x: Tensor, k: Tensor, v: Tensor, keep: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """:meth:`forward`'s output (the same computation, so the same values) and
        :meth:`probabilities`' distribution (B, T, S), from one query projection."""
        q = split_heads(self.q(x), self.heads)
        p = self.dropout if self.training else 0.0
        return self.out(merge_heads(attention(q, k, v, keep, p))), self._probabilities(q, k, keep)

    def probabilities(self, x: Tensor, k: Tensor, keep: Tensor | None) -> Tensor:
        """The attention distribution over the source, averaged over heads: x (B, T, D),
        k (B, Hkv, S, Dh) -> (B, T, S), each row summing to 1 over the kept positions (what
        :meth:`forward` weighs the values with; word alignments read it)."""
        return self._probabilities(split_heads(self.q(x), self.heads), k, keep)

    def _probabilities(self, q: Tensor, k: Tensor, keep: Tensor | None) -> Tensor:
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)  # grouped-query heads
        scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
        if keep is not None:
            scores = scores.masked_fill(~keep, float("-inf"))
        return scores.softmax(-1).mean(1)


class Residual(nn.Module):
    """Post-LN, the paper's: norm(x + dropout(sublayer(x)))."""

    def __init__(self, norm: nn.Module, dropout: float) -> None:
        super().__init__()
        self.norm = norm
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        return self.norm(x + self.dropout(sublayer(x)))


class PreNormResidual(Residual):
    """Pre-LN (Xiong et al., 2020): x + dropout(sublayer(norm(x))); a final norm follows the
    last layer."""

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        return x + self.dropout(sublayer(self.norm(x)))
