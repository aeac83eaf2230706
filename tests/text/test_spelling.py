"""Typos corrected to the training sources' words: every kind of typo the augmentation makes
is undone, case kept; known words, names, short words, masked spans and glossary terms are
left alone; the switch and a checkpoint without the record read words as written."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from mtkit.data.augment import TYPO_KINDS, typo
from mtkit.data.source_words import SourceWords, words_of
from mtkit.engines.base import Engine, Translation
from mtkit.text import TextOptions, translate_texts
from mtkit.text.spelling import corrected
from mtkit.text.translate import as_trained

SENTENCES = [
    "A man rides a horse.",
    "Two children play with a ball on the beach.",
    "The woman is wearing a yellow jacket.",
    "A dog runs through the grass.",
]
WORDS = words_of(SENTENCES * 3 + ["A horse runs."])


@pytest.mark.parametrize("kind", TYPO_KINDS)
def test_every_kind_of_typo_is_undone(kind: str) -> None:
    rng = random.Random(0)
    for word in ["horse", "children", "wearing", "yellow", "through", "beach"]:
        wrong = typo(word, kind, rng)
        if wrong in WORDS.rank:  # a typo that made another known word: nothing to see
            continue
        assert corrected(f"a {wrong} here", WORDS) == f"a {word} here", (kind, wrong)


def test_the_most_frequent_neighbour_wins_and_case_is_kept() -> None:
    words = SourceWords(("runs", "rune", "horse", "man"))
    assert corrected("He rns; Rns", words) == "He runs; Rns"  # a name inside: kept
    assert corrected("Rns fast", words) == "Runs fast"  # its unit's first word
    assert corrected("THE MNA RNS", words) == "THE MAN RUNS"  # no lowercase letter: shouting
    assert corrected("The MNA rns", words) == "The MNA runs"  # an acronym in a sentence


@pytest.mark.parametrize(
    "text",
    [
        "A man rides a horse.",  # known words
        "A man rides a hrose-like zebra",  # "zebra": unknown, no known word one edit away
        "A mn rides",  # two letters: too short to tell
        "A man rides 2horse",  # digits beside: letters only ("horse" is known)
        "A man rides Hrose",  # capitalized inside a sentence: a name
        "the dogs run",  # "dog", "runs": another form of a word, not a typo
    ],
)
def test_what_is_not_a_typo_is_left_alone(text: str) -> None:
    expected = text.replace("hrose-like", "horse-like")
    assert corrected(text, WORDS) == expected
    assert corrected(text, SourceWords()) == text
    assert corrected(text, WORDS, keep={"hrose"}) == text


class Recorder:
    """An engine that translates a line as itself and records what it was given."""

    def __init__(self, engine: Engine, words: SourceWords, **config) -> None:
        self.src_tokenizer, self.max_source_pieces = engine.src_tokenizer, 1000
        self.unit_pieces, self.trained_pieces = 1000, None
        self.config = replace(engine.config, **config)
        self.sentence_style, self.source_words = engine.sentence_style, words
        self.calls: list[list[str]] = []

    def languages(self):
        return None

    def translate(self, lines, search=None, first_number=1, progress=None, constraints=None):  # noqa: ARG002
        self.calls.append(list(lines))
        return [[Translation(line, -1.0, -1.0, len(line.split()))] for line in lines]


@pytest.mark.parametrize(
    "words, config, keep, lines",
    [
        (WORDS, {}, (), ["A man rides a horse.", "Two dogs"]),
        (WORDS, {"spelling": False}, (), ["A man ridse a hrose.", "Tow dogs"]),
        (SourceWords(), {}, (), ["A man ridse a hrose.", "Tow dogs"]),  # nothing recorded
        (WORDS, {}, ("Hrose",), ["A man rides a hrose.", "Two dogs"]),  # a glossary's
    ],
)
def test_the_engine_reads_units_corrected_as_config_and_record_say(
    engine: Engine, words, config, keep, lines
) -> None:
    """ "Tow": its unit's first word, one edit from "two" (which the data has) and from
    "town" (which it has not); the URL (whose path has "hrose") is a masked span."""
    recorder = Recorder(engine, words, **config)
    options = as_trained(recorder, TextOptions(split=True), keep)  # type: ignore[arg-type]
    text = "A man ridse a hrose. Tow dogs https://x.org/hrose"
    (found,) = translate_texts(recorder, [text], options)  # type: ignore[arg-type]
    assert recorder.calls == [lines]
    assert found.text == " ".join(lines) + " https://x.org/hrose"
