"""segment(): sentences cut out of hostile text with nothing lost; cut_long(): safe cuts."""

from __future__ import annotations

import itertools
import math
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from text_helpers import HOSTILE

from mtkit.data.sentence_edges import EDGE, SentenceEdges
from mtkit.text import segment
from mtkit.text.segment import FLOOR, cut_long, is_gap, part_limit

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


# as if "grass" ended a quarter of the training sentences it is in, "a" started a third
EDGES = SentenceEdges(
    (("grass", 0.25), ("bike", 0.2), ("soccer", 0.3), ("man", 0.01)),
    (("a", 0.35), ("two", 0.8), ("the", 0.09), ("rides", 0.001)),
)


def test_cut_long_with_edges_cuts_where_sentences_most_likely_end() -> None:
    run_on = "a dog runs through the grass a man rides a bike two kids play soccer"
    for limit in (6, 8, 13):
        assert cut_long(run_on, words, limit, edges=EDGES) == [
            "a dog runs through the grass",
            "a man rides a bike",
            "two kids play soccer",
        ]
    assert cut_long(run_on, words, 8) == [  # without edges: at the limit
        "a dog runs through the grass a man",
        "rides a bike two kids play soccer",
    ]
    assert cut_long(run_on, words, 15, edges=EDGES) == [run_on]  # it fits: never cut
    # no evidence anywhere: as few parts as fit, the first as long as fits
    assert cut_long("one two three four five", words, 2, edges=EDGES) == [
        "one two",
        "three four",
        "five",
    ]
    # a ';' and an opener's run-on are evidence; a ',' less so; a word longer than the limit
    # is alone in its part, cut in halves
    assert cut_long("x y z; p q r s", words, 5, edges=EDGES) == ["x y z;", "p q r s"]
    assert cut_long("x y z A q r s", words, 5, {"A"}, EDGES) == ["x y z", "A q r s"]
    assert cut_long("x y, z p; q r s", words, 5, edges=EDGES) == ["x y, z p;", "q r s"]
    long_word = ["ab", "cc", "ccc", "cc", "ccc", "de"]
    assert cut_long("ab " + "c" * 10 + " de", chars, 4, edges=EDGES) == long_word


@pytest.mark.parametrize("seed", range(12))
def test_edge_cuts_have_the_least_cost_of_all_cuts_that_fit(seed: int) -> None:
    """Against exhaustive search: every set of spaces whose parts fit, the cost of each cut
    log(EDGE / max(score, FLOOR)); cut_long's parts cost the least."""
    rng = random.Random(seed)
    vocab = ["grass", "bike", "soccer", "man", "a", "two", "the", "rides", "dog", "kid"]
    tokens = [rng.choice(vocab) for _ in range(rng.randint(4, 11))]
    size = lambda texts: [sum(len(w) // 3 + 1 for w in t.split()) for t in texts]  # noqa: E731
    limit = rng.randint(max(size(tokens)), 12)

    def cost(cuts: tuple[int, ...]) -> float:
        return sum(math.log(EDGE / max(EDGES.score(tokens[c - 1], tokens[c]), FLOOR)) for c in cuts)

    best = math.inf
    for n in range(len(tokens)):
        for cuts in itertools.combinations(range(1, len(tokens)), n):
            bounds = (0, *cuts, len(tokens))
            parts = [" ".join(tokens[a:b]) for a, b in itertools.pairwise(bounds)]
            if max(size(parts)) <= limit:
                best = min(best, cost(cuts))
    parts = cut_long(" ".join(tokens), size, limit, edges=EDGES)
    assert max(size(parts)) <= limit and " ".join(parts) == " ".join(tokens)
    ends = tuple(itertools.accumulate(len(p.split()) for p in parts))[:-1]
    assert math.isclose(cost(ends), best), (tokens, parts, limit)


@pytest.mark.parametrize("edges", [SentenceEdges(), EDGES], ids=["at-limit", "at-edges"])
@pytest.mark.parametrize("limit", [1, 3, 10, 31])
@pytest.mark.parametrize("count", [words, chars])
def test_cut_long_parts_fit_and_keep_every_character(limit: int, count, edges) -> None:
    sentence = HOSTILE["long"].strip() + " " + "w" * 50 + ", x; y z" * 30
    parts = cut_long(sentence, count, limit, edges=edges)
    assert all(size <= limit for size in count(parts))
    assert all(part and part == part.strip() for part in parts)
    assert "".join("".join(parts).split()) == "".join(sentence.split())


@pytest.mark.parametrize("edges", [SentenceEdges(), EDGES], ids=["at-limit", "at-edges"])
def test_cut_long_is_linear_in_the_length(edges: SentenceEdges) -> None:
    """2 MB on one line with no full stop: every part fits, nothing lost, in seconds."""
    sentence = ("word " * 9 + "averyveryverylongwordwithoutanyspace, ") * 40000
    start = time.perf_counter()
    parts = cut_long(sentence, chars, 200, edges=edges)
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
