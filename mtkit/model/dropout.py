"""Dropout (Srivastava et al., 2014) whose CPU masks cost a fifth of torch's.

On CPU, ``nn.Dropout`` draws one Bernoulli variable per element (``bernoulli_``, ~10 ns each
on 2 cores: 8 % of a transformer-small training step). :class:`Dropout` draws 64 random bits
at a time from torch's generator (``randint`` over the int64 range) and reads them as four
16-bit draws, so an element is dropped with probability ``round(p * 2^16) / 2^16`` (p = 0.1:
0.0999985) and the kept ones are scaled by the inverse of their own share, which keeps the
expectation exact. Same generator, so seeds, checkpointed random states and resumes work as
before; ``torch.compile`` (with inductor's ``fallback_random``) draws the same masks. Elsewhere
(CUDA), torch's fused kernel is the fast one and is used as is. Attention's dropout on CPU:
:func:`dropped_attention`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

DRAWS = 2**16  # values one 16-bit draw takes


def keep_scale(shape: torch.Size, p: float, dtype: torch.dtype) -> Tensor:
    """A (shape) tensor of 0 where an element is dropped and DRAWS / (DRAWS - cut) where it is
    kept, cut = round(p * DRAWS) of the DRAWS values of a 16-bit draw dropping it."""
    n = math.prod(shape)
    words = torch.randint(-(2**63), 2**63 - 1, ((n + 3) // 4,), dtype=torch.int64)  # 64 bits each
    draws = words.view(torch.int16)[:n].view(shape)  # uniform over [-2^15, 2^15)
    cut = round(p * DRAWS)
    if cut == DRAWS:
        return torch.zeros(shape, dtype=dtype)
    return (draws >= cut - DRAWS // 2).to(dtype).mul_(DRAWS / (DRAWS - cut))


class Dropout(nn.Dropout):
    """``nn.Dropout`` with :func:`keep_scale`'s masks on CPU (same parameters, none)."""

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, True, self.inplace)
        return x * keep_scale(x.shape, self.p, x.dtype)


def dropped_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, p: float, is_causal: bool
) -> Tensor:
    """softmax(q k^T / sqrt(Dh) + mask) v with dropout on the probabilities (q, k, v: (B, H, T,
    Dh), a key/value head per query head), for training on CPU, where SDPA takes its math path:
    that path casts bf16 queries, keys and values to float32 (its products then run in float32,
    not on bf16 hardware) and draws its mask with ``bernoulli_``. Here the products run in the
    inputs' dtype, the softmax in float32, and the mask is :func:`keep_scale`'s (torch's
    generator: seeds and resumes as before). SDPA's causal mask: query i reads keys 0..i."""
    scores = torch.matmul(q, k.transpose(-2, -1))
    scores = scores.to(torch.promote_types(scores.dtype, torch.float32)) * q.shape[-1] ** -0.5
    if is_causal:
        t_q, t_k = scores.shape[-2:]
        mask = torch.ones(t_q, t_k, dtype=torch.bool, device=q.device).tril()
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask
    probs = scores.softmax(-1)
    return torch.matmul((probs * keep_scale(probs.shape, p, probs.dtype)).to(v.dtype), v)
