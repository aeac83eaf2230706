"""Grouping sentences of similar length into padded batches bounded by a token budget."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from mtkit.data.tokenizer import PAD_ID


def token_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices of ``lengths`` grouped longest first so that rows x longest row <= max_tokens.

    Each batch holds sentences of similar length, so little padding is computed; a sentence
    longer than ``max_tokens`` gets a batch of its own.

    >>> token_batches([3, 9, 4, 8, 2], max_tokens=16)
    [[1], [3, 2], [0, 4]]
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = lengths[current[0]] if current else lengths[i]  # the first is the longest
        if current and width * (len(current) + 1) > max_tokens:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def pad_batch(rows: Sequence[Sequence[int]], device: torch.device | str = "cpu") -> Tensor:
    """Right-pad token rows with PAD_ID into one (B, S) int64 tensor.

    >>> pad_batch([[5, 3], [7, 8, 3]]).tolist()
    [[5, 3, 0], [7, 8, 3]]
    """
    out = torch.full((len(rows), max(len(r) for r in rows)), PAD_ID, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out.to(device)
