"""Cleaning: normalisation, empty/duplicate filtering, length and ratio masks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mtkit.data.cleaning import PairFilter, length_mask, normalize


@pytest.mark.parametrize(
    "text, expected",
    [
        ("  Ein Hund.  ", "Ein Hund."),
        ("\tTab\t", "Tab"),
        ("a\r\n", "a"),
        ("two\nlines", "two lines"),
        ("cr\r\nlf", "cr lf"),
        ("\u3000wide space\xa0", "wide space"),
        ("", ""),
        ("   ", ""),
        ("inner   spaces stay", "inner   spaces stay"),
    ],
)
def test_normalize(text: str, expected: str) -> None:
    assert normalize(text) == expected


@given(st.text())
def test_normalize_is_idempotent_and_single_line(text: str) -> None:
    once = normalize(text)
    assert normalize(once) == once
    assert "\n" not in once and "\r" not in once


def test_pair_filter_drops_empty_pairs() -> None:
    keep = PairFilter()
    assert keep(["a", "", "c", ""], ["x", "y", "", ""]) == (["a"], ["x"])
    assert keep.dropped == {"empty": 3, "dedup": 0}


def test_pair_filter_dedup_across_chunks() -> None:
    keep = PairFilter(dedup=True)
    assert keep(["a", "a", "b"], ["x", "x", "x"]) == (["a", "b"], ["x", "x"])
    assert keep(["b", "a", "a"], ["x", "y", "x"]) == (["a"], ["y"])  # (a, y) is new
    assert keep.dropped == {"empty": 0, "dedup": 3}


def test_pair_filter_without_dedup_keeps_duplicates() -> None:
    keep = PairFilter(dedup=False)
    assert keep(["a", "a"], ["x", "x"]) == (["a", "a"], ["x", "x"])


@pytest.mark.parametrize(
    "src, tgt, max_tokens, max_ratio, keep, dropped",
    [
        ([3, 9, 1], [4, 2, 5], 8, 3.0, [True, False, False], (1, 1)),
        ([3, 9, 1], [4, 2, 5], 0, 0.0, [True, True, True], (0, 0)),  # both off
        ([3, 9, 1], [4, 2, 5], 9, 0.0, [True, True, True], (0, 0)),  # max is inclusive
        ([10, 2], [30, 6], 0, 3.0, [True, True], (0, 0)),  # ratio exactly 3 is kept
        ([10, 2], [31, 7], 0, 3.0, [False, False], (0, 2)),
        ([50, 1], [1, 1], 10, 2.0, [False, True], (1, 0)),  # counted once, first reason
        ([0], [3], 0, 2.0, [False], (0, 1)),  # zero pieces count as one
    ],
)
def test_length_mask(src, tgt, max_tokens, max_ratio, keep, dropped) -> None:
    mask, counts = length_mask(np.array(src), np.array(tgt), max_tokens, max_ratio)
    assert mask.tolist() == keep
    assert (counts["max_tokens"], counts["max_ratio"]) == dropped
