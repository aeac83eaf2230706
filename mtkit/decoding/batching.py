"""Padded batches of token rows (grouping by length: :mod:`mtkit.data.batching`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from mtkit.data.tokenizer import PAD_ID


def pad_batch(
    rows: Sequence[Sequence[int]], device: torch.device | str = "cpu", pad: int = PAD_ID
) -> Tensor:
    """Right-pad token rows with ``pad`` into one (B, S) int64 tensor.

    >>> pad_batch([[5, 3], [7, 8, 3]]).tolist()
    [[5, 3, 0], [7, 8, 3]]
    """
    width = max(len(r) for r in rows)  # one tensor from lists: no tensor a row
    padded = [[*row, *[pad] * (width - len(row))] for row in rows]
    return torch.tensor(padded, dtype=torch.long, device=device)
