"""Position schemes for the Transformer family.

Embedding-time schemes give rows added to the token embeddings: ``SinusoidalPositions``
(Vaswani et al., 2017) and ``LearnedPositions`` (Gehring et al., 2017).

Attention-time schemes share one small interface, ``AttentionPositions``, that a self-attention
module calls at two points: ``rotate(x, offset)`` on the new queries and keys (before keys go
into a decoding cache) and ``attend(q, k, v, mask_or_bias, dropout_p, training, causal=...,
q_offset=...)`` over all keys. The base class is plain scaled dot-product attention (what
embedding-time schemes need); ``Rotary`` (Su et al., 2021) overrides ``rotate``, ``ALiBi``
(Press et al., 2022) and ``ShawRelative`` (Shaw et al., 2018) override ``attend``.

Shapes: B batch, H heads, Tq queries, Tk keys, Dh = head width. Masks are boolean keep masks
broadcastable to (B, H, Tq, Tk), True = attend, as in ``mtkit.model.layers``; a float tensor is
taken as an additive bias instead. ``q_offset`` is the absolute position of the first query;
keys sit at 0..Tk-1, so the default ``Tk - Tq`` fits both the full pass (0) and a cached
decoding step (t, one query over t + 1 keys).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.errors import MtkitError
from mtkit.model.attention import attention, per_query_head


def _check_length(offset: int, length: int, max_positions: int) -> None:
    if offset + length > max_positions:
        raise MtkitError(
            f"sequence of {offset + length} tokens exceeds max_positions={max_positions}"
        )


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


class SinusoidalPositions(nn.Module):
    """Fixed sinusoids, the table of :func:`sinusoidal_positions` (sines then cosines)."""

    def __init__(self, max_positions: int, dim: int) -> None:
        super().__init__()
        self.max_positions = max_positions
        self.register_buffer("table", sinusoidal_positions(max_positions, dim), persistent=False)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        """Rows offset..offset+length-1, (T, D)."""
        _check_length(offset, length, self.max_positions)
        return self.table[offset : offset + length]

    def at(self, positions: Tensor) -> Tensor:
        """The rows of ``positions`` (R,) -> (R, D): rows at different positions."""
        return self.table[positions]


class LearnedPositions(nn.Module):
    """A trained table of absolute positions (Gehring et al., 2017, "Convolutional Sequence to
    Sequence Learning"), initialized N(0, D^-1/2) like fairseq's learned positions."""

    def __init__(self, max_positions: int, dim: int) -> None:
        super().__init__()
        self.max_positions = max_positions
        self.table = nn.Embedding(max_positions, dim)
        nn.init.normal_(self.table.weight, mean=0.0, std=dim**-0.5)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        """Rows offset..offset+length-1, (T, D)."""
        _check_length(offset, length, self.max_positions)
        return self.table.weight[offset : offset + length]

    def at(self, positions: Tensor) -> Tensor:
        """The rows of ``positions`` (R,) -> (R, D): rows at different positions."""
        return self.table.weight[positions]


def causal_keep(
    q_len: int, k_len: int, q_offset: int, device: torch.device | None = None
) -> Tensor:
    """(Tq, Tk) bool, True where key j <= query position i = q_offset + row.

    >>> causal_keep(2, 3, 1).int().tolist()
    [[1, 1, 0], [1, 1, 1]]
    """
    i = torch.arange(q_offset, q_offset + q_len, device=device)[:, None]
    return torch.arange(k_len, device=device)[None, :] <= i


def as_bias(mask_or_bias: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """A keep mask as an additive bias (0 where kept, -inf elsewhere); a bias unchanged."""
    if mask_or_bias is None or mask_or_bias.dtype != torch.bool:
        return mask_or_bias
    zero = torch.zeros((), dtype=dtype, device=mask_or_bias.device)
    return zero.masked_fill(~mask_or_bias, float("-inf"))


class AttentionPositions(nn.Module):
    """No attention-time positions: ``rotate`` is the identity, ``attend`` is SDPA."""

    def rotate(self, x: Tensor, offset: int | Tensor) -> Tensor:
        """x (B, H, T, Dh) at positions offset..offset+T-1 -> (B, H, T, Dh); ``offset`` a
        tensor (B,): each row's one position (T = 1), rows at different positions."""
        return x

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask_or_bias: Tensor | None = None,
        dropout_p: float = 0.0,
        training: bool = False,
        *,
        causal: bool = False,
        q_offset: int | None = None,
    ) -> Tensor:
        """softmax(q k^T / sqrt(Dh) + mask) v: q (B, H, Tq, Dh), k/v (B, Hkv, Tk, Dh) with Hkv
        dividing H (:func:`mtkit.model.attention.attention`)."""
        p = dropout_p if training else 0.0
        t_q, t_k = q.shape[-2], k.shape[-2]
        offset = t_k - t_q if q_offset is None else q_offset
        if causal and mask_or_bias is None and offset == 0 and t_q == t_k:
            return attention(q, k, v, dropout_p=p, is_causal=True)
        if causal:
            keep = causal_keep(t_q, t_k, offset, q.device)
            bias = as_bias(keep, q.dtype)
            mask_or_bias = bias if mask_or_bias is None else as_bias(mask_or_bias, q.dtype) + bias
        return attention(q, k, v, mask_or_bias, p)


def rotate_half(x: Tensor) -> Tensor:
    """[x1, x2] -> [-x2, x1] on the last dimension's halves."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Rotary(AttentionPositions):
    """Rotary position embedding (Su et al., 2021, "RoFormer: Enhanced Transformer with Rotary
    Position Embedding"): the pair (x_m, x_{m+Dh/2}) of a query or key at position p is rotated
    by the angle p * base^(-2m/Dh), so q_i . k_j depends on i - j only.

    Layout: non-interleaved ("rotate half", as GPT-NeoX and Hugging Face Llama), pairing
    dimension m with m + Dh/2, over the whole head. In CTranslate2 4.8 that is
    ``rotary_dim=0`` (all dimensions), ``rotary_interleave=False`` ("the head dimensions are
    sliced in half"; ``True``, its default, pairs 2m with 2m+1 as GPT-J) and
    ``rotary_base=base``, on the Transformer{Encoder,Decoder}Spec, which applies it in
    self-attention only; q/k weights go over unpermuted (CTranslate2's
    ``permute_for_sliced_rotary`` is for interleaved checkpoints).
    """

    def __init__(self, head_dim: int, max_positions: int, base: float = 10000.0) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"rotary needs an even head width, got {head_dim}")
        self.max_positions = max_positions
        exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
        inv_freq = base**-exponents  # (Dh/2,)
        angles = torch.arange(max_positions, dtype=torch.float64)[:, None] * inv_freq[None, :]
        angles = torch.cat((angles, angles), dim=-1)  # (P, Dh): one angle per (m, m + Dh/2) pair
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def rotate(self, x: Tensor, offset: int | Tensor) -> Tensor:
        """x (B, H, T, Dh) at positions offset..offset+T-1 -> (B, H, T, Dh); ``offset`` a
        tensor (B,): each row's one position (T = 1)."""
        if isinstance(offset, Tensor):
            cos = self.cos[offset][:, None, None].to(x.dtype)  # (B, 1, 1, Dh)
            return x * cos + rotate_half(x) * self.sin[offset][:, None, None].to(x.dtype)
        t = x.shape[-2]
        _check_length(offset, t, self.max_positions)
        cos = self.cos[offset : offset + t].to(x.dtype)  # (T, Dh)
        sin = self.sin[offset : offset + t].to(x.dtype)
        return x * cos + rotate_half(x) * sin


def alibi_slopes(heads: int) -> Tensor:
    """ALiBi's head slopes (Press et al., 2022, section 3): for n a power of two, the geometric
    sequence 2^(-8/n), 2^(-16/n), ..., 2^(-8); otherwise (the rule of the paper's code) the n'
    slopes of the largest power of two n' < n, then every other slope of 2n' (the 1st, 3rd,
    ...), n - n' of them. CTranslate2 computes the same.

    >>> alibi_slopes(4).tolist()
    [0.25, 0.0625, 0.015625, 0.00390625]
    """

    def power_of_2(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    below = 2 ** int(math.floor(math.log2(heads)))
    slopes = power_of_2(below) + power_of_2(2 * below)[0::2][: heads - below]
    return torch.tensor(slopes, dtype=torch.float32)


class ALiBi(AttentionPositions):
    """Attention with Linear Biases (Press et al., 2022, "Train Short, Test Long"): no position
    embeddings; head h adds -slope_h * (i - j) to the score of query i for key j <= i (causal).
    The paper is causal only; for a bidirectional encoder this uses -slope_h * |i - j|.

    CTranslate2 4.8: ``TransformerDecoderSpec(alibi=True, alibi_use_positive_positions=False,
    scale_alibi=False)`` (the bias is added after the 1/sqrt(Dh) scaling, as here). It adds
    slope_h * (j - (Tk - 1)) to every row, which differs from ours by a constant per row, so the
    causal softmax is the same. ``TransformerEncoderSpec`` has no ALiBi: refuse encoder ALiBi.
    """

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(heads), persistent=False)

    def bias(self, q_len: int, k_len: int, q_offset: int = 0, causal: bool = True) -> Tensor:
        """(H, Tq, Tk) additive bias for queries at q_offset..q_offset+Tq-1 over keys 0..Tk-1;
        -inf on future keys when ``causal``."""
        i = torch.arange(q_offset, q_offset + q_len, device=self.slopes.device)[:, None]
        j = torch.arange(k_len, device=self.slopes.device)[None, :]
        distance = (i - j).abs().to(self.slopes.dtype)  # (Tq, Tk)
        bias = -self.slopes[:, None, None] * distance  # (H, Tq, Tk)
        if causal:
            bias = bias.masked_fill(j > i, float("-inf"))
        return bias

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask_or_bias: Tensor | None = None,
        dropout_p: float = 0.0,
        training: bool = False,
        *,
        causal: bool = False,
        q_offset: int | None = None,
    ) -> Tensor:
        """SDPA with the ALiBi bias added to the (masked) scaled scores."""
        t_q, t_k = q.shape[-2], k.shape[-2]
        offset = t_k - t_q if q_offset is None else q_offset
        bias = self.bias(t_q, t_k, offset, causal).to(q.dtype)
        if mask_or_bias is not None:
            bias = bias + as_bias(mask_or_bias, q.dtype)  # (B, H, Tq, Tk)
        p = dropout_p if training else 0.0
        return attention(q, k, v, bias, p)


class ShawRelative(AttentionPositions):
    """Relative position representations for keys and values (Shaw et al., 2018,
    "Self-Attention with Relative Position Representations"), eqs. 3-5:

        e_ij = q_i . (k_j + a^K_ij) / sqrt(Dh),   z_i = sum_j softmax_j(e_ij) (v_j + a^V_ij),

    with a^K_ij = w^K[clip(j - i, -k, k)] and a^V_ij likewise: two (2k + 1, Dh) tables shared by
    all heads. SDPA cannot add the value term, so ``attend`` computes the attention itself.

    CTranslate2 4.8: ``with_relative_position=True`` (``relative_position`` on the encoder and
    decoder specs: self-attention only, no absolute position encodings), with
    ``relative_position_keys`` = ``keys.weight`` and ``relative_position_values`` =
    ``values.weight``; it derives k from the table height and uses the same clipping.
    """

    def __init__(self, head_dim: int, max_relative_position: int) -> None:
        super().__init__()
        self.max_relative_position = max_relative_position
        self.keys = nn.Embedding(2 * max_relative_position + 1, head_dim)
        self.values = nn.Embedding(2 * max_relative_position + 1, head_dim)
        for table in (self.keys, self.values):
            nn.init.normal_(table.weight, mean=0.0, std=head_dim**-0.5)

    def relative_buckets(self, q_len: int, k_len: int, q_offset: int = 0) -> Tensor:
        """(Tq, Tk) long: clip(j - i, -k, k) + k for query position i = q_offset + row."""
        i = torch.arange(q_offset, q_offset + q_len, device=self.keys.weight.device)[:, None]
        j = torch.arange(k_len, device=self.keys.weight.device)[None, :]
        k = self.max_relative_position
        return (j - i).clamp(-k, k) + k

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask_or_bias: Tensor | None = None,
        dropout_p: float = 0.0,
        training: bool = False,
        *,
        causal: bool = False,
        q_offset: int | None = None,
    ) -> Tensor:
        """softmax((q k^T + q a_K^T) / sqrt(Dh) + mask) (v + a_V): (B, H, Tq, Dh)."""
        t_q, t_k = q.shape[-2], k.shape[-2]
        offset = t_k - t_q if q_offset is None else q_offset
        k, v = per_query_head(k, q.shape[-3]), per_query_head(v, q.shape[-3])
        buckets = self.relative_buckets(t_q, t_k, offset)
        rel_k, rel_v = self.keys(buckets), self.values(buckets)  # (Tq, Tk, Dh) each
        scores = q @ k.transpose(-1, -2) + torch.einsum("bhqd,qkd->bhqk", q, rel_k.to(q.dtype))
        scores = scores / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
        if mask_or_bias is not None:
            scores = scores + as_bias(mask_or_bias, scores.dtype)
        if causal:
            scores = scores.masked_fill(~causal_keep(t_q, t_k, offset, q.device), float("-inf"))
        weights = F.dropout(scores.softmax(dim=-1), dropout_p, training)
        return weights @ v + torch.einsum("bhqk,qkd->bhqd", weights, rel_v.to(q.dtype))
