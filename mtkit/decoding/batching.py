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
    out = torch.full((len(rows), max(len(r) for r in rows)), pad, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out.to(device)
