"""Transformer building blocks (Vaswani et al., 2017, "Attention Is All You Need"): self- and
cross-attention layers with grouped-query keys/values, and the residual connection with its
norm.

Attention itself is :func:`mtkit.model.attention.attention` (SDPA). Shapes use
B batch, S source length, T target length, D model width, H heads, Hkv key/value heads
(Hkv = H, or a divisor of it), Dh = D / H.

Modules receive built parts (a norm, an attention-time position scheme), never config flags;
:mod:`mtkit.model.builders` is where config names become parts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from torch import Tensor, nn

from mtkit.model.attention import attention, merge_heads, per_query_head, split_heads
from mtkit.model.dropout import Dropout
from mtkit.model.state import KeyValueCache, SourceCache

if TYPE_CHECKING:
    from mtkit.model.positions import AttentionPositions


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

    def step(
        self,
        x: Tensor,
        cache: KeyValueCache,
        keep: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> Tensor:
        """One decoding step at slot t = cache.length: x (R, 1, D); the rotated key and the
        value are appended to the cache, and the query attends to all t + 1 of them (none lies
        in its future). Rows that joined a running decode: ``positions`` (R,) each row's own
        position (else t), ``keep`` (R, 1, 1, t + 1) the slots it reads (from its first on)."""
        t = cache.length
        q, k, v = self.project(x)
        at = t if positions is None else positions
        q, k = self.positions.rotate(q, at), self.positions.rotate(k, at)
        keys, values = cache.append(k, v)  # (R, Hkv, t + 1, Dh) each
        y = self.positions.attend(q, keys, values, keep, q_offset=t)
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
        k = per_query_head(k, self.heads)
        scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
        if keep is not None:
            scores = scores.masked_fill(~keep, float("-inf"))
        return scores.softmax(-1).mean(1)


class Residual(nn.Module):
    """Post-LN, the paper's: norm(x + dropout(sublayer(x)))."""

    def __init__(self, norm: nn.Module, dropout: float) -> None:
        super().__init__()
        self.norm = norm
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        return self.norm(x + self.dropout(sublayer(x)))


class PreNormResidual(Residual):
    """Pre-LN (Xiong et al., 2020): x + dropout(sublayer(norm(x))); a final norm follows the
    last layer."""

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        return x + self.dropout(sublayer(self.norm(x)))
