"""segment(): sentences cut out of hostile text with nothing lost; cut_long(): safe cuts."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from text_helpers import HOSTILE

from mtkit.text import segment
from mtkit.text.segment import cut_long, is_gap, part_limit

BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def check_nothing_lost(original: str, lang: str = "en") -> None:
    """Round trip, every non-gap character in exactly one sentence, no sentence edge a gap
    character, no line break inside a sentence."""
    text = segment(original, lang)
    assert text.rebuild(text.all_sentences()) == original
    gaps = [text.gap(i) for i in range(len(text) + 1)]
    assert all(is_gap(char) for gap in gaps for char in gap)
    inside = "".join(text.all_sentences())
    assert sorted(c for c in inside if not is_gap(c)) == sorted(
        c for c in original if not is_gap(c)
    )
    for sentence in text.all_sentences():
        assert not is_gap(sentence[0]) and not is_gap(sentence[-1])
        assert not any(b in sentence for b in BREAKS), sentence


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_text_loses_nothing(name: str) -> None:
    check_nothing_lost(HOSTILE[name])


PIECES = [*"ab .!?,;\n\r\t\u3002\ufeff😀ש", "  ", "Dr. ", "A man runs. ", "\r\n"]


@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
@settings(max_examples=300, deadline=None)
def test_any_text_loses_nothing(original: str) -> None:
    check_nothing_lost(original)


@pytest.mark.parametrize("lang", ["en", "de", "he", "xx-unknown", ""])
def test_sentences_and_paragraphs(lang: str) -> None:
    text = segment("A man runs. A woman walks!\r\n\r\n  Is it late?\nno stop here", lang)
    assert text.all_sentences() == ["A man runs.", "A woman walks!", "Is it late?", "no stop here"]
    assert text.gap(2) == "\r\n\r\n  "


@pytest.mark.parametrize("original", ["", " ", "\n\n", "\ufeff", " \t\r\n "])
def test_empty_and_whitespace_give_no_sentence(original: str) -> None:
    text = segment(original, "en")
    assert len(text) == 0 and text.gap(0) == original


def test_a_long_line_without_full_stop_is_one_sentence() -> None:
    original = "and then " * 555 + "end"  # 5,000 characters, no full stop
    assert len(original) >= 4998
    assert segment(original, "en").all_sentences() == [original]


def words(texts: list[str]) -> list[int]:
    return [len(text.split()) for text in texts]


def chars(texts: list[str]) -> list[int]:
    return [len(text) for text in texts]


def test_cut_long_prefers_clause_boundaries() -> None:
    sentence = "one two three four, five six seven; eight nine ten eleven twelve"
    assert cut_long(sentence, words, 7) == [
        "one two three four, five six seven;",
        "eight nine ten eleven twelve",
    ]
    assert cut_long(sentence, words, 100) == [sentence]
    clause = "alpha beta gamma delta epsilon, zeta eta theta iota kappa lambda mu"
    assert cut_long(clause, words, 8) == [
        "alpha beta gamma delta epsilon,",
        "zeta eta theta iota kappa lambda mu",
    ]
    no_clause = clause.replace(",", "")
    assert cut_long(no_clause, words, 8) == [
        "alpha beta gamma delta epsilon zeta eta theta",
        "iota kappa lambda mu",
    ]


@pytest.mark.parametrize("limit", [1, 3, 10, 31])
@pytest.mark.parametrize("count", [words, chars])
def test_cut_long_parts_fit_and_keep_every_character(limit: int, count) -> None:
    sentence = HOSTILE["long"].strip() + " " + "w" * 50 + ", x; y z" * 30
    parts = cut_long(sentence, count, limit)
    assert all(size <= limit for size in count(parts))
    assert all(part and part == part.strip() for part in parts)
    assert "".join("".join(parts).split()) == "".join(sentence.split())


def test_cut_long_is_linear_in_the_length() -> None:
    """2 MB on one line with no full stop: every part fits, nothing lost, in seconds."""
    sentence = ("word " * 9 + "averyveryverylongwordwithoutanyspace, ") * 40000
    start = time.perf_counter()
    parts = cut_long(sentence, chars, 200)
    assert time.perf_counter() - start < 10
    assert all(size <= 200 for size in chars(parts))
    assert "".join("".join(parts).split()) == "".join(sentence.split())


def test_parts_of_a_run_on_without_sentence_ends_have_the_typical_length() -> None:
    """A sentence that marks no end inside (a run-on without full stops) goes in parts of the
    training sentences' typical length; one that does is cut at the limit, at its ends."""
    assert part_limit("a man runs a dog sits on a mat", 48, 23) == 23
    assert part_limit("A man runs A dog sits", 48, 23) == 23  # run-on cuts: openers only
    assert part_limit("a man runs a dog sits.", 48, 23) == 23  # its own end is not inside
    for marked in ["A man runs. A dog sits", 'He said "go." Then', "走。跑", "Really?! yes"]:
        assert part_limit(marked, 48, 23) == 48, marked
    assert part_limit("a man runs", 48, 0) == 48  # not recorded
    assert part_limit("a man runs", 16, 23) == 16  # never more than the limit
