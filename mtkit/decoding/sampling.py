"""Choosing one token per row: greedy argmax, or sampling with temperature, top-k and top-p.

Sampling draws from the model's (constrained) distribution, restricted to the ``top_k`` most
likely tokens (Fan et al., 2018) and/or the smallest set whose probability reaches ``top_p``
(nucleus sampling, Holtzman et al., 2020), sharpened or flattened by ``temperature``. It is
used for back-translation (Edunov et al., 2018), where sampled sources beat beam outputs.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def filter_top_k(logits: Tensor, k: int) -> Tensor:
    """Keep the ``k`` largest entries of each row (ties at the k-th value kept), -inf elsewhere.

    >>> filter_top_k(torch.tensor([[1.0, 3.0, 2.0]]), 2).tolist()
    [[-inf, 3.0, 2.0]]
    """
    if k <= 0 or k >= logits.shape[-1]:
        return logits
    kth = logits.topk(k, dim=-1).values[:, -1:]  # (R, 1)
    return logits.masked_fill(logits < kth, -math.inf)


def filter_top_p(logits: Tensor, p: float) -> Tensor:
    """Keep the smallest set of most likely tokens whose probability reaches ``p`` (R, V).

    The most likely token is always kept.

    >>> filter_top_p(torch.tensor([[0.0, 1.0, 3.0]]).log(), 0.7).exp().tolist()
    [[0.0, 0.0, 3.0]]
    """
    if p >= 1.0:
        return logits
    ordered, index = logits.sort(dim=-1, descending=True)
    probs = ordered.softmax(-1)
    before = probs.cumsum(-1) - probs  # probability of the strictly more likely tokens
    drop = before.ge(p)
    drop[:, 0] = False
    return logits.scatter(1, index, ordered.masked_fill(drop, -math.inf))


def sample_tokens(
    lprobs: Tensor,
    generator: torch.Generator | None,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
) -> Tensor:
    """One token per row (R,) drawn from softmax(lprobs / temperature) after top-k/top-p."""
    logits = lprobs / temperature if temperature != 1.0 else lprobs
    logits = filter_top_p(filter_top_k(logits, top_k), top_p)
    probs = logits.float().softmax(-1)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


def greedy_tokens(lprobs: Tensor) -> Tensor:
    """The most likely token of each row (R,)."""
    return lprobs.argmax(-1)
