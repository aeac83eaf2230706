"""Token bucketing: one greedy cut for training, validation and decoding, any order."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtkit.data.batching import cut_batches, token_batches
from mtkit.errors import MtkitError


def longest_prefixes(order: list[int], sizes: list[int], max_tokens: int) -> list[list[int]]:
    """Reference: each batch is the longest prefix of what is left that fits (at least one)."""
    batches, rest = [], list(order)
    while rest:
        fits = [
            k for k in range(1, len(rest) + 1) if k * max(sizes[i] for i in rest[:k]) <= max_tokens
        ]
        k = max(fits, default=1)
        batches.append(rest[:k])
        rest = rest[k:]
    return batches


@pytest.mark.parametrize(
    "order, sizes, max_tokens, expected",
    [
        ([0, 1, 2, 3], [2, 3, 3, 4], 8, [[0, 1], [2, 3]]),  # ascending
        ([3, 2, 1, 0], [2, 3, 3, 4], 8, [[3, 2], [1, 0]]),  # descending
        ([0, 3, 1, 2], [2, 3, 3, 4], 8, [[0, 3], [1, 2]]),  # arbitrary
        ([0, 1, 2], [5, 1, 1], 10, [[0, 1], [2]]),  # the running maximum, not the last size
        ([0, 1, 2], [2, 2, 2], 6, [[0, 1, 2]]),  # exactly max_tokens fits
        ([0, 1, 2], [2, 2, 2], 5, [[0, 1], [2]]),
        ([4, 2], [9, 9, 3, 9, 3], 6, [[4, 2]]),  # order may be a subset of the items
        ([], [], 10, []),
    ],
)
def test_cut_batches(order, sizes, max_tokens, expected) -> None:
    assert cut_batches(order, sizes, max_tokens) == expected
    assert cut_batches(order, sizes, max_tokens, oversize="error") == expected


@pytest.mark.parametrize(
    "order, sizes, max_tokens, expected",
    [
        ([0, 1, 2], [2, 9, 2], 6, [[0], [1], [2]]),  # in the middle
        ([0, 1, 2], [2, 2, 9], 6, [[0, 1], [2]]),  # last (ascending)
        ([2, 0, 1], [2, 2, 9], 6, [[2], [0, 1]]),  # first (descending)
        ([0, 1], [7, 9], 6, [[0], [1]]),  # two in a row
    ],
)
def test_oversize_alone(order, sizes, max_tokens, expected) -> None:
    assert cut_batches(order, sizes, max_tokens, oversize="alone") == expected


@pytest.mark.parametrize(
    "order, sizes, longest",
    [([0, 1, 2], [2, 9, 2], 9), ([0, 1, 2], [2, 7, 8], 8), ([1, 0], [12, 7], 12)],
)
def test_oversize_error_names_the_longest_pair(order, sizes, longest) -> None:
    message = (
        f"^a sentence pair of {longest} tokens \\(BOS/EOS included\\) exceeds max_tokens=6: "
        "raise max_tokens or prepare the data with a lower length limit$"
    )
    with pytest.raises(MtkitError, match=message):
        cut_batches(order, sizes, 6, oversize="error")


def test_unknown_oversize_policy() -> None:
    with pytest.raises(ValueError, match="oversize must be one of alone, error, got 'skip'"):
        cut_batches([0], [1], 4, oversize="skip")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 30), max_size=40).flatmap(
        lambda sizes: st.tuples(st.just(sizes), st.permutations(range(len(sizes))))
    ),
    st.integers(1, 80),
    st.sampled_from(["arbitrary", "ascending", "descending"]),
)
def test_matches_the_longest_prefix_reference(sizes_order, max_tokens, how) -> None:
    sizes, order = sizes_order
    if how != "arbitrary":
        order = sorted(order, key=lambda i: sizes[i], reverse=how == "descending")
    batches = cut_batches(order, sizes, max_tokens)
    assert batches == longest_prefixes(order, sizes, max_tokens)
    assert [i for b in batches for i in b] == list(order)
    for batch in batches:
        assert len(batch) == 1 or len(batch) * max(sizes[i] for i in batch) <= max_tokens


@pytest.mark.parametrize(
    "lengths, max_tokens, expected",
    [
        ([3, 9, 4, 8, 2], 16, [[1], [3, 2], [0, 4]]),
        ([3, 9, 4, 8, 2, 2, 30, 5], 16, [[6], [1], [3, 7], [2, 0, 4, 5]]),  # 30: alone, first
        ([2, 2, 2], 4, [[0, 1], [2]]),  # ties keep input order
        ([5], 1, [[0]]),
        ([], 8, []),
    ],
)
def test_token_batches_longest_first(lengths, max_tokens, expected) -> None:
    assert token_batches(lengths, max_tokens) == expected
