"""The decoding guard's checks (mtkit.decoding.guard): what counts as degenerate against its
source, case patterns and their round trip, squeezing, chunks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtkit.decoding.guard import (
    CHAR_RUN,
    OTHER,
    SENTENCE,
    TITLE,
    UPPER,
    case_pattern,
    char_runs,
    chunk_sizes,
    degeneration,
    squeezed,
    with_case,
)


def pieces(text: str) -> list[str]:
    """A stand-in tokenizer: one piece per word."""
    return ["\u2581" + word for word in text.split()]


@pytest.mark.parametrize(
    ("source", "text", "target", "why"),
    [
        # character runs: 10 or more, longer than the source's run of that character
        ("A MAN.", "Ein „GGGGGGGGGCCCCCCCCCC…", None, "a run of 10 'C'"),
        ("A MAN.", "Ein „GGGGGGGGGCCCCCCCCC…", None, None),  # 9 and 9
        ("a run on", "Ein verddddbbbbbbbbbb", None, "a run of 10 'b'"),
        ("AAAAAAAAAAAA", "aaaaaaaaaaaa", None, None),  # the source's own run (any case)
        ("zzzzzzzzzzzz", "zzzzzzzzzzzzz", None, "a run of 13 'z'"),  # one more than it has
        ("Hmmmmmmmmmm!", "Hmmmmmmmmmm!", None, None),
        ("a b", "a" + " " * 12 + "b", None, "a run of 12 ' '"),
        # piece runs: more than max(3, the source's) + 3, unless the source spells them
        ("the dog", "der " * 6, None, None),
        ("the dog", "der " * 7, None, "a run of 7 pieces '▁der'"),
        ("ha ha ha ha ha ha", "ha " * 9, None, None),  # copied: the source spells it
        ("hey hey hey hey hey", "he " * 8, None, None),  # limit 5 + 3 = 8
        ("hey hey hey hey hey", "he " * 9, None, "a run of 9 pieces '▁he'"),
        ("call 000000000", "ruf 000000000", ["▁ruf", "▁0"] + ["0"] * 8, None),  # a number
        ("call 1", "ruf 000000000", ["▁ruf", "▁0"] + ["0"] * 8, "a run of 8 pieces '0'"),
        # length: more than 3 * source pieces + 10
        ("a b", "x y " * 8, None, None),  # 16 pieces = 3 * 2 + 10
        ("a b", "x y " * 8 + "z", None, "17 pieces for 2 source pieces"),
    ],
)
def test_degeneration(source: str, text: str, target: list[str] | None, why: str | None) -> None:
    assert degeneration(source, pieces(source), text, target or pieces(text)) == why


def test_clean_translations_of_long_sentences_are_not_degenerate() -> None:
    source = "a man in a blue shirt is standing on a ladder cleaning windows " * 6
    text = "ein mann in einem blauen hemd steht auf einer leiter und putzt fenster " * 6
    assert degeneration(source, pieces(source), text, pieces(text)) is None


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("A MAN RIDES A BIKE.", UPPER),
        ("USA", UPPER),
        ("OK!", UPPER),
        ("CALL 555-1234 NOW", UPPER),
        ("I", SENTENCE),  # one letter: no pattern to speak of
        ("A Man Rides A Bike", TITLE),
        ("„Lord Of The Rings“", TITLE),
        ("A man rides a bike.", SENTENCE),
        ("Hello", SENTENCE),  # one word: a sentence
        ("The NASA Rover", TITLE),
        ("THE iPhone", SENTENCE),
        ("a Man", OTHER),
        ("42 ...", OTHER),
        ("", OTHER),
    ],
)
def test_case_pattern(text: str, pattern: str) -> None:
    assert case_pattern(text) == pattern


@pytest.mark.parametrize(
    "source", ["A MAN RIDES A BIKE.", "A Man Rides A Bike", "A man rides a bike.", "Ünder Öl"]
)
def test_case_round_trips_through_lowercase(source: str) -> None:
    """A translation that copies the lowercased source comes back as the source was."""
    assert with_case(source.lower(), case_pattern(source)) == source


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet="aAbBzZ .„!3ÄßGg", max_size=40),
    st.text(alphabet="aAbBzZ .„!3ÄßGg", max_size=40),
)
def test_squeezed_text_is_never_degenerate_by_its_characters(text: str, source: str) -> None:
    found = squeezed(text, source)
    allowed = char_runs(source)
    assert all(run < CHAR_RUN or run <= allowed.get(c, 0) for c, run in char_runs(found).items())
    assert len(found.split()) == len(text.split())  # words stay words (alignments hold)
    if degeneration(source, [], text, []) is None:  # no piece: only the character rule
        assert found == text  # nothing to cut: unchanged


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 20), max_size=60), st.integers(1, 30))
def test_chunks_cover_the_words_within_the_limit(sizes: list[int], limit: int) -> None:
    chunks = chunk_sizes(sizes, limit)
    assert sum(chunks) == len(sizes) and all(c >= 1 for c in chunks)
    at = 0
    for count in chunks:
        size = sum(sizes[at : at + count])
        assert size <= limit or count == 1  # a word longer than the limit goes alone
        at += count
    fits = all(n <= limit for n in sizes)
    if fits and sizes:  # never more than twice as many chunks as the fewest possible
        assert len(chunks) <= 2 * -(-sum(sizes) // limit)
