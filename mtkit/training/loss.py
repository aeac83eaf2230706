"""Label-smoothed cross-entropy (Szegedy et al., 2016, "Rethinking the Inception Architecture").

mtkit uses the formulation of fairseq's ``label_smoothed_cross_entropy`` (before 2021): for a
target token y over a vocabulary of V entries,

    loss = (1 - eps) * (-log p(y)) + eps * mean_v(-log p(v))
         = (1 - eps) * nll + (eps / V) * sum_v(-log p(v))

i.e. cross-entropy against the distribution that puts 1 - eps + eps/V on y and eps/V on every
other entry (PAD included). At eps = 0 the loss is the NLL. Padding positions contribute nothing.

Worked example (V = 2, eps = 0.1): logits [0, ln 3] give p = [1/4, 3/4]; for y = 1,
nll = ln(4/3) and mean_v(-log p(v)) = (ln 4 + ln(4/3)) / 2, so
loss = 0.9 * ln(4/3) + 0.1 * (ln 4 + ln(4/3)) / 2 ~= 0.3324.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable
from torch.nn import functional as F

from mtkit.data.tokenizer import PAD_ID


def label_smoothed_nll_loss(
    logits: Tensor, target: Tensor, epsilon: float, ignore_index: int = PAD_ID
) -> tuple[Tensor, Tensor]:
    """Summed smoothed loss and summed NLL over the non-padding targets, both fp32 scalars.

    :param logits: (B, T, V) or (N, V) unnormalised scores
    :param target: (B, T) or (N,) gold ids; ``ignore_index`` marks padding
    :param epsilon: smoothing mass in [0, 1)
    """
    flat = logits.float().reshape(-1, logits.shape[-1])  # (N, V)
    return _SmoothedNLL.apply(flat, target.reshape(-1), epsilon, ignore_index)


class _SmoothedNLL(torch.autograd.Function):
    """The loss with its gradient written out: for row i with gold y, p = softmax(logits_i),
    d loss_i / d logits_iv = (a_i + b_i) p_v - a_i [v = y] - b_i / V, where a_i is the weight of
    the NLL (1 - eps of the loss's gradient plus the NLL's own) and b_i = eps times the loss's
    (0 on padding). One (N, V) tensor in the backward pass, where autograd's chain of
    log_softmax, gather and mean builds four: the loss's backward pass takes a third of the
    time (``benchmarks/bench_train_mtkit.py``)."""

    @staticmethod
    def forward(
        ctx: FunctionCtx, logits: Tensor, target: Tensor, epsilon: float, ignore_index: int
    ) -> tuple[Tensor, Tensor]:
        lprobs = F.log_softmax(logits, dim=-1)  # (N, V)
        keep = target.ne(ignore_index)  # (N,)
        gold = target.clamp(min=0)[:, None]  # (N, 1)
        nll_sum = -lprobs.gather(1, gold).squeeze(1).masked_fill(~keep, 0.0).sum()
        ctx.save_for_backward(lprobs, gold, keep)
        ctx.epsilon = epsilon
        if epsilon == 0.0:
            return nll_sum, nll_sum.clone()
        smooth_sum = -lprobs.mean(dim=-1).masked_fill(~keep, 0.0).sum()
        return (1.0 - epsilon) * nll_sum + epsilon * smooth_sum, nll_sum

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_loss: Tensor, grad_nll: Tensor) -> tuple[Tensor | None, ...]:
        lprobs, gold, keep = ctx.saved_tensors
        eps, kept = ctx.epsilon, keep.to(lprobs.dtype)
        a = kept * (grad_loss * (1.0 - eps) + grad_nll)  # (N,)
        b = kept * (grad_loss * eps)  # (N,)
        grad = torch.exp(lprobs).mul_((a + b)[:, None]).sub_((b / lprobs.shape[1])[:, None])
        return grad.scatter_add_(1, gold, -a[:, None]), None, None, None
