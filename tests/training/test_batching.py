"""Token batches: size limit with padding, each sentence once, deterministic per (seed, epoch)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mtkit.data.binarized import ParallelData
from mtkit.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from mtkit.errors import MtkitError
from mtkit.training.batching import (
    chunk_sorted,
    collate,
    epoch_batches,
    iterate_groups,
    rank_slots,
    resolve_workers,
    sentence_sizes,
)


def random_lengths(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)  # test data only; training never uses numpy's RNG
    return rng.integers(0, 40, n), rng.integers(0, 40, n)


def test_sizes_count_bos_eos() -> None:
    sizes = sentence_sizes(np.array([3, 0, 5]), np.array([4, 2, 1]))
    assert sizes.tolist() == [5, 3, 6]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.integers(41, 600), st.integers(0, 1000), st.integers(1, 5))
def test_batches_fit_and_cover_each_sentence_once(n: int, max_tokens: int, seed: int, epoch: int):
    sizes = sentence_sizes(*random_lengths(n, seed))
    batches = epoch_batches(sizes, max_tokens, seed, epoch)
    for batch in batches:
        assert len(batch) * int(sizes[batch].max()) <= max_tokens
    assert sorted(torch.cat(batches).tolist()) == list(range(n))


def test_padded_tensors_respect_max_tokens(tiny_dataset) -> None:
    data = ParallelData(tiny_dataset, "train")
    sizes = sentence_sizes(data.src_lengths, data.tgt_lengths)
    for indices in epoch_batches(sizes, 96, seed=1, epoch=1):
        pairs = [tuple(map(torch.from_numpy, data.pair(i))) for i in indices.tolist()]
        batch = collate(pairs)
        for tensor in batch:
            assert tensor.numel() <= 96


def test_deterministic_per_seed_and_epoch_and_different_otherwise() -> None:
    sizes = sentence_sizes(*random_lengths(500, 0))

    def as_lists(batches: list[torch.Tensor]) -> list[list[int]]:
        return [b.tolist() for b in batches]

    first = as_lists(epoch_batches(sizes, 200, seed=3, epoch=1))
    assert first == as_lists(epoch_batches(sizes, 200, seed=3, epoch=1))
    assert first != as_lists(epoch_batches(sizes, 200, seed=3, epoch=2))
    assert first != as_lists(epoch_batches(sizes, 200, seed=4, epoch=1))
    # the contents of batches change too, not only their order
    assert sorted(first) != sorted(as_lists(epoch_batches(sizes, 200, seed=3, epoch=2)))


def test_buckets_group_similar_lengths() -> None:
    sizes = sentence_sizes(*random_lengths(2000, 1))
    batches = epoch_batches(sizes, 400, seed=1, epoch=1)
    padded = sum(len(b) * int(sizes[b].max()) for b in batches)
    assert padded < 1.1 * int(sizes.sum())  # little padding after sorting


def test_epoch_batches_unchanged() -> None:
    """Pinned from the code before bucketing moved to mtkit.data.batching: same seed, same data."""
    sizes = sentence_sizes(
        np.array([3, 0, 7, 12, 5, 5, 1, 9, 2, 14, 4, 6]),
        np.array([4, 2, 3, 11, 8, 5, 0, 10, 2, 3, 6, 6]),
    )
    assert sizes.tolist() == [5, 3, 8, 13, 9, 6, 2, 11, 3, 15, 7, 7]
    epoch1 = [[3], [2, 4], [5, 10, 11], [9], [6, 8, 1, 0], [7]]
    epoch2 = [[6, 1, 8, 0], [3], [9], [7], [5, 10, 11], [2, 4]]
    assert [b.tolist() for b in epoch_batches(sizes, 24, seed=7, epoch=1)] == epoch1
    assert [b.tolist() for b in epoch_batches(sizes, 24, seed=7, epoch=2)] == epoch2
    assert [b.dtype for b in epoch_batches(sizes, 24, seed=7, epoch=1)] == [torch.int64] * 6


def test_chunk_and_too_long_sentence() -> None:
    order = torch.tensor([2, 0, 1])
    sizes = torch.tensor([3, 3, 2])
    assert [b.tolist() for b in chunk_sorted(order, sizes, 6)] == [[2, 0], [1]]
    with pytest.raises(MtkitError, match="exceeds max_tokens=2"):
        chunk_sorted(order, sizes, 2)


def test_collate_teacher_forcing() -> None:
    pairs = [
        (torch.tensor([7, 8]), torch.tensor([9])),
        (torch.tensor([5]), torch.tensor([4, 6, 10])),
    ]
    batch = collate(pairs)
    assert batch.src.tolist() == [[7, 8, EOS_ID], [5, EOS_ID, PAD_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 9, PAD_ID, PAD_ID], [BOS_ID, 4, 6, 10]]
    assert batch.tgt_out.tolist() == [[9, EOS_ID, PAD_ID, PAD_ID], [4, 6, 10, EOS_ID]]


@pytest.mark.parametrize("n_batches", [1, 4, 5, 7, 8])
def test_ranks_split_a_group_like_accumulation(n_batches: int) -> None:
    group = [torch.tensor([i]) for i in range(n_batches)][:4]  # one group of W * F = 4
    single = rank_slots(group, 0, 1, 4)
    ranks = [rank_slots(group, r, 2, 2) for r in range(2)]
    real = sorted(int(b) for slots in ranks for b, w in slots if w)
    assert real == sorted(int(b) for b, _ in single)
    assert len(ranks[0]) == len(ranks[1])  # every rank runs as many passes (DDP)


def test_iterate_groups_resumes_mid_epoch(tiny_dataset) -> None:
    data = ParallelData(tiny_dataset, "train")
    sizes = sentence_sizes(data.src_lengths, data.tgt_lengths)
    batches = epoch_batches(sizes, 128, seed=1, epoch=1)
    args = {"num_workers": 0}
    full = list(iterate_groups(data, batches, 0, 0, 1, 2, args))
    assert full[-1].consumed == len(batches)
    assert sum(g.sentences for g in full) == len(data)
    rest = list(iterate_groups(data, batches, full[2].consumed, 0, 1, 2, args))
    assert [g.consumed for g in rest] == [g.consumed for g in full[3:]]
    for a, b in zip(rest, full[3:], strict=True):
        for p, q in zip(a.batches, b.batches, strict=True):
            assert all(torch.equal(x, y) for x, y in zip(p, q, strict=True))
        assert a.ntokens == b.ntokens == sum(int(x.tgt_out.ne(PAD_ID).sum()) for x in a.batches)


def test_worker_processes_load_the_groups_the_training_process_loads(tiny_dataset) -> None:
    """DataLoader workers (auto on CUDA): the same tensors, in the same groups and order."""
    data = ParallelData(tiny_dataset, "train")
    batches = epoch_batches(sentence_sizes(data.src_lengths, data.tgt_lengths), 128, 1, 1)
    alone, workers = (
        list(iterate_groups(data, batches, 2, 0, 1, 2, {"num_workers": n})) for n in (0, 2)
    )
    assert len(alone) == len(workers) > 3
    for a, b in zip(alone, workers, strict=True):
        assert (a.consumed, a.ntokens, a.sentences) == (b.consumed, b.ntokens, b.sentences)
        for p, q in zip(a.batches, b.batches, strict=True):
            assert all(torch.equal(x, y) for x, y in zip(p, q, strict=True))


def test_auto_loads_in_worker_processes_on_cuda_only() -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert resolve_workers(-1, cpu)[0] == 0 and "auto: on CPU" in resolve_workers(-1, cpu)[1]
    assert resolve_workers(-1, cuda)[0] == 2 and "auto: on CUDA" in resolve_workers(-1, cuda)[1]
    assert resolve_workers(0, cuda) == (0, "as asked")
    assert resolve_workers(3, cpu) == (3, "as asked")


def test_max_tokens_counts_the_longer_side_plus_one() -> None:
    """Sources of 10 pieces, targets of 1: each pair costs 11 tokens, not 2 target tokens."""
    sizes = sentence_sizes(np.full(6, 10), np.full(6, 1))
    batches = epoch_batches(sizes, 22, seed=1, epoch=1)
    assert sorted(len(b) for b in batches) == [2, 2, 2]
    sizes = sentence_sizes(np.array([1, 1, 7]), np.array([3, 9, 2]))  # a short source, a long one
    assert sizes.tolist() == [4, 10, 8]
    assert [b.tolist() for b in chunk_sorted(torch.tensor([0, 2, 1]), sizes, 20)] == [[0, 2], [1]]
