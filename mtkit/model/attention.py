"""Attention as a function: softmax(q k^T / sqrt(Dh) + mask) v through
``torch.nn.functional.scaled_dot_product_attention``, grouped-query keys/values (Ainslie et al.,
2023) without copies where the mask allows, written out inside a compiled graph (and, for
training with attention dropout on CPU, in :mod:`mtkit.model.dropout`); and the head reshapes
every attention layer uses. Shapes: B batch, T length, D width, H heads, Hkv key/value heads
(H, or a divisor of it), Dh = D / H.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from mtkit.model.dropout import dropped_attention


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
    if dropout_p and q.device.type == "cpu":
        k, v = per_query_head(k, h), per_query_head(v, h)
        return dropped_attention(q, k, v, mask, dropout_p, is_causal)
    if h == hkv:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal
        )
    same_for_all = mask is None or (mask.dim() == 4 and mask.shape[1] == 1 and mask.shape[2] == 1)
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
    graph (``--compile``'s decoding step: a few queries over a few keys, no dropout; an
    encoder's queries, any number, go to SDPA), where inductor fuses products and sums into a
    loop or two instead of calling SDPA's kernel (~0.9 ms a call at 160 rows x 16 keys on one
    AVX2 core, the loops a fraction of it)."""
    if not torch.compiler.is_compiling() or torch.is_grad_enabled():  # eager, or training
        return False
    from torch.fx.experimental.symbolic_shapes import statically_known_true as known

    return known(q.shape[-2] <= COMPILED_QUERIES) and not dropout_p and not is_causal


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


def per_query_head(x: Tensor, heads: int) -> Tensor:
    """Grouped-query keys or values (B, Hkv, T, Dh) as one copy per query head (B, H, T, Dh):
    query head h reads key/value head h // (H / Hkv), for computations that need them per
    head (the written-out relative attention, attention probabilities).

    >>> per_query_head(torch.arange(2.0).view(1, 2, 1, 1), 4).flatten().tolist()
    [0.0, 0.0, 1.0, 1.0]
    """
    kv_heads = x.shape[-3]
    return x if kv_heads == heads else x.repeat_interleave(heads // kv_heads, dim=-3)
