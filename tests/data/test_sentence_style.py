"""The training sources' sentence style: which capitalized words open sentences, and the mark
they end with; recorded as a plain mapping and read back, a bad one refused in one line."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from mtkit.data.sentence_edges import EDGE, MIN_COUNT, SentenceEdges, edges_of
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
    style = style_of(sentences)
    assert (style.openers, style.final) == (("A",), "")  # "." ends 1/3: not final
    assert "de" not in dict(style.edges.starts) and dict(style.edges.starts)["a"] == 1.0
    assert style_of([f"A dog runs {n}" for n in range(10)]).final == ""  # a digit is no mark
    assert style_of([]) == SentenceStyle() and not SentenceStyle()


def test_the_record_round_trips_and_a_bad_one_is_refused_in_one_line() -> None:
    edges = SentenceEdges((("grass", 0.25), ("bike", 0.2)), (("a", 0.35),))
    style = SentenceStyle(("A", "Two"), ".", 22, edges)
    assert SentenceStyle.from_dict(style.to_dict()) == style
    assert SentenceStyle.from_dict({}) == SentenceStyle()
    older = {"openers": ["A"], "final": "."}  # before lengths were recorded: not recorded
    assert SentenceStyle.from_dict(older) == SentenceStyle(("A",), ".", 0)
    assert SentenceStyle.from_dict({"length": 9}) == SentenceStyle(length=9)  # nor edges
    for bad, what in [
        ([], "must be a mapping"),
        ({"openers": "A"}, "openers must be a list of words"),
        ({"openers": [""]}, "openers must be a list of words"),
        ({"final": ".."}, "final must be one punctuation mark or empty"),
        ({"final": "x"}, "final must be one punctuation mark or empty"),
        ({"length": -1}, "length must be a number of pieces"),
        ({"length": "22"}, "length must be a number of pieces"),
        ({"length": True}, "length must be a number of pieces"),
        ({"edges": []}, "edges: must be a mapping"),
        ({"edges": {"ends": ["a"]}}, r"edges\.ends: must map words to shares between 0 and 1"),
        ({"edges": {"starts": {"a": 1.5}}}, r"edges\.starts: must map words to shares"),
        ({"edges": {"starts": {"a": True}}}, r"edges\.starts: must map words to shares"),
        ({"edges": {"ends": {"": 0.5}}}, r"edges\.ends: must map words to shares"),
    ]:
        with pytest.raises(MtkitError, match=rf"^x.pt: sentence_style: {what}"):
            SentenceStyle.from_dict(bad, "x.pt: sentence_style")


def test_edges_are_the_shares_of_a_words_occurrences_that_end_or_start_a_sentence() -> None:
    sentences = ["A dog runs in the grass.", "Two men ride a bike!", "The man in the grass"] * (
        MIN_COUNT
    ) + ["A rare word."] * (MIN_COUNT - 1)
    edges = edges_of(sentences)
    # grass: 2 of its 2 per triple end one; rare, word: too rare to count
    assert dict(edges.ends) == {"grass": 1.0, "bike": 1.0}
    assert dict(edges.starts) == {"the": 0.3333, "a": 0.6429, "two": 1.0}  # a rare: 4 of 4
    assert [w for w, _ in edges.starts] == ["the", "a", "two"]  # the most frequent first
    assert edges.score("in the grass", "a man") == 0.6429
    assert edges.score("in the Grass,", "Two men") == 1.0  # cased and marked as typed
    assert edges.score("in the grass", "rare") == edges.score("", "a") == 0.0
    assert edges.score("grass 42", "a") == 0.0  # the last word is a number: no evidence
    assert edges_of([]) == SentenceEdges() and not SentenceEdges()


def test_multi30k_captions_run_on_score_above_the_edge_between_them_not_inside() -> None:
    """The shares of the shipped Multi30k train.en; its val captions lowercased without marks:
    of the spaces between two of them most score above EDGE, of those inside very few."""
    train, val = (read_lines(RECIPE / f"{split}.en.gz") for split in ("train", "val"))
    edges = edges_of(train)
    run_on = "a dog runs through the grass a man rides a bike two kids play soccer".split()
    scores = [edges.score(a, b) for a, b in zip(run_on, run_on[1:], strict=False)]
    assert {i for i, s in enumerate(scores) if s > EDGE} == {5, 10}, scores  # grass|a, bike|two
    words = [re.sub(r"[^\w\s]", "", caption).lower().split() for caption in val]
    inside = [edges.score(a, b) > EDGE for w in words for a, b in zip(w, w[1:], strict=False)]
    between = [edges.score(a[-1], b[0]) > EDGE for a, b in zip(words, words[1:], strict=False)]
    assert sum(inside) / len(inside) < 0.01 and sum(between) / len(between) > 0.65


RECIPE = Path(__file__).parents[2] / "recipes" / "multi30k" / "data"


def read_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()
