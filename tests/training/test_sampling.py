"""Temperature sampling of a multilingual dataset's directions (mtkit.training.sampling)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mtkit.training.batching import epoch_batches, sentence_sizes
from mtkit.training.sampling import epoch_counts, epoch_indices


@pytest.mark.parametrize(
    "sizes, temperature, expected",
    [
        ([900, 100], 1.0, [900, 100]),  # proportional: each pair once
        ([900, 100], 2.0, [750, 250]),  # sqrt(0.9) : sqrt(0.1) = 3 : 1
        ([500, 300, 200], 1e6, [333, 333, 333]),  # towards uniform
        ([999, 1], 1e6, [500, 500]),
        ([10_000, 1], 1.5, [9979, 22]),  # 10001 / (1e4 ** (2/3) + 1) = 21.5 for the small one
    ],
)
def test_epoch_counts(sizes: list[int], temperature: float, expected: list[int]) -> None:
    assert epoch_counts(sizes, temperature) == expected


def test_one_direction_or_t1_samples_every_pair_once() -> None:
    gen = torch.Generator().manual_seed(0)
    assert epoch_indices([(0, 10)], 5.0, gen) is None
    assert epoch_indices([(0, 10), (10, 12)], 1.0, gen) is None


def test_an_epoch_takes_its_counts_from_each_direction() -> None:
    ranges = [(0, 900), (900, 1000)]
    indices = epoch_indices(ranges, 2.0, torch.Generator().manual_seed(1))
    assert indices is not None
    counts = np.bincount(indices.numpy(), minlength=1000)
    assert counts[:900].sum() == 750 and counts[:900].max() == 1  # a subset, no repeats
    assert counts[900:].min() == 2 and counts[900:].max() == 3  # 2 full passes + 50
    assert counts[900:].sum() == 250


def test_batches_are_a_function_of_seed_and_epoch() -> None:
    rng = np.random.default_rng(0)
    sizes = sentence_sizes(rng.integers(1, 30, 300), rng.integers(1, 30, 300))
    ranges = [(0, 250), (250, 280), (280, 300)]

    def run(seed: int, epoch: int, temperature: float) -> list[list[int]]:
        return [b.tolist() for b in epoch_batches(sizes, 120, seed, epoch, ranges, temperature)]

    assert run(1, 1, 1.0) == [b.tolist() for b in epoch_batches(sizes, 120, 1, 1)]
    assert run(1, 2, 5.0) == run(1, 2, 5.0)
    assert run(1, 2, 5.0) != run(1, 3, 5.0) and run(1, 2, 5.0) != run(2, 2, 5.0)
    flat = torch.tensor([i for b in run(1, 2, 5.0) for i in b])
    expected = epoch_counts([250, 30, 20], 5.0)
    assert [int(((flat >= a) & (flat < b)).sum()) for a, b in ranges] == expected
