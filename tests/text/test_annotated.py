"""AnnotatedText: gaps and sentences, and rebuilding a text with its layout."""

from __future__ import annotations

import pytest
from file_helpers import WordTokenizer
from text_helpers import HOSTILE

from mtkit.errors import MtkitError
from mtkit.text import AnnotatedText, TextOptions, plan, segment
from mtkit.text.plan import unit_lines


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


class Tagged(WordTokenizer):
    tags = (">>de<<", ">>fr<<")


def test_a_plan_holds_each_texts_tag_and_each_sentences_mask_and_units() -> None:
    texts = [">>fr<< see https://x.org now\r\n\r\n  a b c d e\r\n", "One two. Three four.\n"]
    lines, one_by_one = (plan(texts, TextOptions(split=False), Tagged(), 3) for _ in range(2))
    assert lines == one_by_one  # a plan is data: equal for equal input
    first, second = lines
    assert (first.tag, second.tag) == (">>fr<<", "")
    assert first.all_sentences() == ["see https://x.org now", "  a b c d e"]
    assert [m.text if m else None for m in first.masked] == ["see 1 now", "  a b c d e"]
    assert first.units == ((("see 1 now", 0),), (("  a b c d e", 0),))  # unsplit: never cut
    assert first.rebuild(["1", "2"]) == "1\r\n\r\n2\r\n"  # each line's \r stays in its gap
    assert (
        second.all_sentences() == ["One two. Three four."]
        and unit_lines(lines, TextOptions())[0] == ">>fr<< see 1 now"
    )
    split = plan(texts, TextOptions(), Tagged(), 3)
    assert split[1].all_units() == ["One two.", "Three four."] and split[0].units[1] == (
        ("a b c", 0),
        ("d e", 6),
    )
    with pytest.raises(MtkitError, match="units for 1 of 2 sentences"):
        AnnotatedText("a b", ((0, 1), (2, 3)), units=((("a", 0),),))
