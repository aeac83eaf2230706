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

Training projects the decoder's last hidden states into the vocabulary inside the loss
(:func:`projected_label_smoothed_nll_loss`), a block of rows at a time: the (N, V) logits,
the largest tensor of an update, never exist whole (see docs/train.md).
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


# rows of the output projection at a time: (1024, 8000) fp32 log-probabilities are 32 MB; far
# fewer rows make the weight's gradient a product of too short an inner dimension (64 rows:
# 1.2x slower than the whole batch at once), and a block's tensors are what the pass allocates
PROJECTION_ROWS = 1024


def projected_label_smoothed_nll_loss(
    hidden: Tensor,
    weight: Tensor,
    target: Tensor,
    epsilon: float,
    ignore_index: int = PAD_ID,
    bias: Tensor | None = None,
    dtype: torch.dtype | None = None,
    rows: int = PROJECTION_ROWS,
) -> tuple[Tensor, Tensor]:
    """:func:`label_smoothed_nll_loss` of the logits ``hidden @ weight.T + bias``, projected
    ``rows`` rows at a time in ``dtype`` (None: fp32; bf16 as autocast would run the projection)
    with the gradients of ``hidden`` and ``weight`` taken in the same pass. The loss is
    differentiable, the NLL is not (it is for logging).

    :param hidden: (B, T, D) or (N, D) final decoder states
    :param weight: (V, D) output projection; ``bias``: (V,) added to the logits, not trained
    """
    flat = hidden.reshape(-1, hidden.shape[-1])
    return _ProjectedSmoothedNLL.apply(
        flat, weight, target.reshape(-1), epsilon, ignore_index, bias, dtype, rows
    )


class _ProjectedSmoothedNLL(torch.autograd.Function):
    """The output projection and the loss in blocks of rows (as Liger-Kernel's fused linear
    cross-entropy): per block the logits, their log-softmax, the loss terms and, where a
    gradient is wanted, the gradient of the block's logits for a loss gradient of 1 (as
    :class:`_SmoothedNLL`'s backward) multiplied into the gradients of ``hidden`` and
    ``weight`` at once. The backward pass scales those by the loss's gradient."""

    @staticmethod
    def forward(
        ctx: FunctionCtx,
        hidden: Tensor,
        weight: Tensor,
        target: Tensor,
        epsilon: float,
        ignore_index: int,
        bias: Tensor | None,
        dtype: torch.dtype | None,
        rows: int,
    ) -> tuple[Tensor, Tensor]:
        dtype = dtype or torch.float32
        wide = torch.promote_types(dtype, torch.float32)  # the loss and the sums of gradients
        h, w = hidden.to(dtype), weight.to(dtype)
        want_h, want_w = ctx.needs_input_grad[:2]
        grad_h = torch.empty(h.shape, dtype=wide) if want_h else None
        grad_w = torch.zeros(w.shape, dtype=wide) if want_w else None
        keep = target.ne(ignore_index)
        gold = target.clamp(min=0)[:, None]
        nll = torch.zeros((), dtype=wide)
        smooth = torch.zeros((), dtype=wide)
        for start in range(0, h.shape[0], rows):
            block = slice(start, start + rows)
            logits = h[block] @ w.t()
            if bias is not None:
                logits = logits.to(wide) + bias
            lprobs = F.log_softmax(logits, dim=-1, dtype=wide)  # (rows, V)
            drop = ~keep[block]
            nll -= lprobs.gather(1, gold[block]).squeeze(1).masked_fill_(drop, 0.0).sum()
            if epsilon:
                smooth -= lprobs.mean(dim=-1).masked_fill_(drop, 0.0).sum()
            if not (want_h or want_w):
                continue
            # d loss / d logits = p - (1 - eps) [v = y] - eps / V on kept rows, 0 on padding
            kept = keep[block].to(wide)[:, None]
            grad = lprobs.exp_().mul_(kept).sub_(kept * (epsilon / w.shape[0]))
            grad = grad.scatter_add_(1, gold[block], kept * (epsilon - 1.0)).to(dtype)
            if want_h:
                grad_h[block] = grad @ w
            if want_w:
                grad_w += grad.t() @ h[block]
        ctx.save_for_backward(grad_h, grad_w)
        ctx.hidden_dtype = hidden.dtype
        ctx.mark_non_differentiable(nll)
        return (1.0 - epsilon) * nll + epsilon * smooth, nll

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor | None, ...]:
        grad_h, grad_w = ctx.saved_tensors
        grad_h = None if grad_h is None else (grad_h * grad_loss).to(ctx.hidden_dtype)
        grad_w = None if grad_w is None else grad_w * grad_loss
        return grad_h, grad_w, None, None, None, None, None, None
