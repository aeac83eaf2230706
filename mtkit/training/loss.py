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

from torch import Tensor
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
    lprobs = F.log_softmax(logits.float(), dim=-1).view(-1, logits.shape[-1])  # (N, V)
    target = target.reshape(-1)  # (N,)
    keep = target.ne(ignore_index)  # (N,)
    nll = -lprobs.gather(1, target.clamp(min=0)[:, None]).squeeze(1)  # (N,)
    nll_sum = nll.masked_fill(~keep, 0.0).sum()
    if epsilon == 0.0:
        return nll_sum, nll_sum
    smooth = -lprobs.mean(dim=-1)  # (N,)
    smooth_sum = smooth.masked_fill(~keep, 0.0).sum()
    return (1.0 - epsilon) * nll_sum + epsilon * smooth_sum, nll_sum
