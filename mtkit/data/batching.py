"""Token bucketing: cutting an ordered run of items into batches bounded by a token budget.

A batch of n items costs ``n * (its longest item)`` tokens, padding counted. :func:`cut_batches`
is the one implementation: training (ascending sizes, after a seeded shuffle), validation and
decoding (longest first) differ only in the order they pass and in what an item longer than the
whole budget does (``oversize``).
"""

from __future__ import annotations

from collections.abc import Sequence

from mtkit.errors import MtkitError

OVERSIZE = ("alone", "error")


def cut_batches(
    order: Sequence[int], sizes: Sequence[int], max_tokens: int, oversize: str = "alone"
) -> list[list[int]]:
    """Cut ``order`` greedily, keeping its order, into batches of rows x longest row <= max_tokens.

    ``sizes[i]`` is item i's padded length. The running maximum is tracked, so any order works;
    an ascending or descending one gives batches of similar sizes. An item longer than
    ``max_tokens`` gets a batch of its own (``oversize="alone"``) or raises MtkitError
    (``oversize="error"``, naming the longest such item).

    >>> cut_batches([2, 0, 1, 3], [3, 3, 2, 9], max_tokens=6)
    [[2, 0], [1], [3]]
    """
    if oversize not in OVERSIZE:
        raise ValueError(f"oversize must be one of {', '.join(OVERSIZE)}, got {oversize!r}")
    if oversize == "error":
        longest = max((sizes[i] for i in order), default=0)
        if longest > max_tokens:
            raise MtkitError(
                f"a sentence pair of {longest} tokens (BOS/EOS included) exceeds max_tokens="
                f"{max_tokens}: raise max_tokens or prepare the data with a lower length limit"
            )
    batches: list[list[int]] = []
    current: list[int] = []
    widest = 0
    for i in order:
        size = sizes[i]
        if current and (len(current) + 1) * max(widest, size) > max_tokens:
            batches.append(current)
            current, widest = [], 0
        current.append(i)
        widest = max(widest, size)
    if current:
        batches.append(current)
    return batches


def token_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices of ``lengths`` grouped longest first so that rows x longest row <= max_tokens.

    Each batch holds sentences of similar length, so little padding is computed; a sentence
    longer than ``max_tokens`` gets a batch of its own.

    >>> token_batches([3, 9, 4, 8, 2], max_tokens=16)
    [[1], [3, 2], [0, 4]]
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return cut_batches(order, lengths, max_tokens, oversize="alone")
