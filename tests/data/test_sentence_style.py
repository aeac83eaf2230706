"""The training sources' sentence style: which capitalized words open sentences, and the mark
they end with; recorded as a plain mapping and read back, a bad one refused in one line."""

from __future__ import annotations

import pytest

from mtkit.data.sentence_style import MIN_OPENS, SentenceStyle, style_of
from mtkit.errors import MtkitError


def test_openers_open_sentences_and_are_not_capitalized_inside_them() -> None:
    sentences = (
        ["A dog runs.", "Two men in New York talk.", "New shoes.", "the cat sleeps."] * MIN_OPENS
        + ["Rare word opens."] * (MIN_OPENS - 1)
        + ["Bob waves.", "Then Bob waves."] * MIN_OPENS
        + ["A bird sings."]
    )
    style = style_of(sentences)
    # New: inside a sentence as often as it opens one; the: not capitalized; Rare: too rare;
    # Bob: capitalized inside; most frequent first
    assert style.openers == ("A", "Two", "Then")
    assert style.final == "."


def test_a_tag_is_not_a_word_and_an_uncommon_mark_is_not_final() -> None:
    sentences = [">>de<< A dog runs.", ">>fr<< A cat runs!", ">>de<< A bird sings"] * MIN_OPENS
    assert style_of(sentences) == SentenceStyle(("A",), "")  # "." ends 1/3: not final
    assert style_of([f"A dog runs {n}" for n in range(10)]).final == ""  # a digit is no mark
    assert style_of([]) == SentenceStyle() and not SentenceStyle()


def test_the_record_round_trips_and_a_bad_one_is_refused_in_one_line() -> None:
    style = SentenceStyle(("A", "Two"), ".", 22)
    assert SentenceStyle.from_dict(style.to_dict()) == style
    assert SentenceStyle.from_dict({}) == SentenceStyle()
    older = {"openers": ["A"], "final": "."}  # before lengths were recorded: not recorded
    assert SentenceStyle.from_dict(older) == SentenceStyle(("A",), ".", 0)
    for bad, what in [
        ([], "must be a mapping"),
        ({"openers": "A"}, "openers must be a list of words"),
        ({"openers": [""]}, "openers must be a list of words"),
        ({"final": ".."}, "final must be one punctuation mark or empty"),
        ({"final": "x"}, "final must be one punctuation mark or empty"),
        ({"length": -1}, "length must be a number of pieces"),
        ({"length": "22"}, "length must be a number of pieces"),
        ({"length": True}, "length must be a number of pieces"),
    ]:
        with pytest.raises(MtkitError, match=rf"^x.pt: sentence_style: {what}"):
            SentenceStyle.from_dict(bad, "x.pt: sentence_style")
