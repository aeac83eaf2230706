"""AnnotatedText: gaps and sentences, and rebuilding a text with its layout."""

from __future__ import annotations

import pytest
from text_helpers import HOSTILE

from mtkit.errors import MtkitError
from mtkit.text import AnnotatedText, segment


def test_gaps_and_sentences() -> None:
    text = AnnotatedText("  A b.\r\n\r\nC d.  ", ((2, 6), (10, 14)))
    assert len(text) == 2
    assert [text.sentence(0), text.sentence(1)] == ["A b.", "C d."]
    assert [text.gap(i) for i in range(3)] == ["  ", "\r\n\r\n", "  "]
    assert text.rebuild(["X.", "Y."]) == "  X.\r\n\r\nY.  "
    with pytest.raises(IndexError):
        text.gap(3)


def test_no_sentences_one_gap() -> None:
    text = AnnotatedText(" \n ")
    assert len(text) == 0 and text.gap(0) == " \n "
    assert text.rebuild([]) == " \n "


@pytest.mark.parametrize("ranges", [((3, 2),), ((0, 2), (1, 3)), ((0, 9),), ((2, 2),)])
def test_bad_ranges_are_refused(ranges: tuple) -> None:
    with pytest.raises(MtkitError):
        AnnotatedText("abcdef", ranges)


def test_rebuild_needs_one_translation_per_sentence() -> None:
    with pytest.raises(MtkitError, match="1 translations for 2 sentences"):
        AnnotatedText("a b", ((0, 1), (2, 3))).rebuild(["x"])


@pytest.mark.parametrize("name", list(HOSTILE))
def test_identity_rebuild_gives_the_input_back(name: str) -> None:
    text = segment(HOSTILE[name], "en")
    assert text.rebuild(text.all_sentences()) == HOSTILE[name]


@pytest.mark.parametrize("name", list(HOSTILE))
def test_rebuild_keeps_every_gap(name: str) -> None:
    text = segment(HOSTILE[name], "en")
    out = AnnotatedText(text.text, text.sentences).rebuild([f"<{i}>" for i in range(len(text))])
    expected = text.gap(0) + "".join(f"<{i}>{text.gap(i + 1)}" for i in range(len(text)))
    assert out == expected
    assert out.count("\n") == HOSTILE[name].count("\n")  # lines in = lines out
