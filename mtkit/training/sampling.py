"""Which pairs an epoch trains on when a dataset joins several directions (issue 16).

Direction i, with n_i of the N training pairs, is sampled with probability

    p_i = q_i ** (1 / T) / sum_j q_j ** (1 / T),   q_i = n_i / N

(Arivazhagan et al. 2019, "Massively Multilingual Neural Machine Translation in the Wild",
section 4.2). T = 1 is proportional to the sizes: every pair once per epoch, as with one
direction; a larger T flattens the distribution towards uniform, so small directions are seen
more often and large ones less.

An epoch keeps N pairs in all: m_i = round(N * p_i) of direction i (at least one), that is
``m_i // n_i`` full passes over its pairs plus a random ``m_i % n_i`` of them. The choice is a
pure function of (seed, epoch), drawn from the epoch's generator, so a resumed run samples the
same epoch as an uninterrupted one.

>>> epoch_counts([900, 100], 1.0), epoch_counts([900, 100], 5.0), epoch_counts([900, 100], 1e9)
([900, 100], [608, 392], [500, 500])
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def epoch_counts(sizes: Sequence[int], temperature: float) -> list[int]:
    """Pairs of each direction in an epoch of ``sum(sizes)`` pairs (see the module docstring)."""
    total = sum(sizes)
    weights = [(n / total) ** (1.0 / temperature) for n in sizes]
    norm = sum(weights)
    return [max(1, round(total * w / norm)) for w in weights]


def epoch_indices(
    ranges: Sequence[tuple[int, int]], temperature: float, gen: torch.Generator
) -> Tensor | None:
    """The pair indices of an epoch (repeats allowed), or None for every pair once (one
    direction, or T = 1). ``ranges``: each direction's [start, stop) in the split."""
    if len(ranges) < 2 or temperature == 1.0:
        return None
    sizes = [stop - start for start, stop in ranges]
    parts = []
    for (start, stop), n, m in zip(ranges, sizes, epoch_counts(sizes, temperature), strict=True):
        every = torch.arange(start, stop)
        parts += [every] * (m // n)
        parts.append(start + torch.randperm(n, generator=gen)[: m % n])
    return torch.cat(parts)
