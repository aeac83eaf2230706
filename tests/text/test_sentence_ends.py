"""Sentence ends the writer left out: run-ons cut where an opener follows a lowercase word, a
sentence without a final mark translated with the training data's; nothing else changed."""

from __future__ import annotations

from dataclasses import replace

import pytest
from text_helpers import HOSTILE

from mtkit.data.sentence_edges import SentenceEdges
from mtkit.data.sentence_style import SentenceStyle
from mtkit.data.source_words import SourceWords
from mtkit.engines.base import Engine, Translation
from mtkit.text import TextOptions, segment, translate_text, translate_texts
from mtkit.text.segment import cut_long
from mtkit.text.sentence_ends import closed, run_on_cuts

OPENERS = frozenset({"A", "Two", "The"})
STYLE = SentenceStyle(tuple(OPENERS), ".")
RUN_ON = "A man sleeps on a bench Two dogs play in New York The sun sets"
SENTENCES = ["A man sleeps on a bench", "Two dogs play in New York", "The sun sets"]


@pytest.mark.parametrize(
    "text, cuts",
    [
        (RUN_ON, ["bench", "York"]),
        ("We met in the USA The end", []),  # after a capital letter
        ("A man sleeps A dog barks", ["sleeps"]),
        ("Two men talk The, end", ["talk"]),  # the opener with punctuation after it
        ("A man sleeps. A dog barks", []),  # punctuated: the segmenter's
        ("A man at 10 A dog", []),  # after a digit
        ("A man sleeps Bob barks", []),  # not an opener
        ("A man sleeps An dog", []),
    ],
)
def test_run_ons_are_cut_after_a_lowercase_word_before_an_opener(text, cuts) -> None:
    found = run_on_cuts(text, OPENERS)
    assert [text[:s].split()[-1] for s, _ in found] == cuts
    assert all(text[s:e].isspace() for s, e in found)
    assert run_on_cuts(text, ()) == []


EDGES = SentenceEdges((("grass", 0.6), ("bike", 0.2)), (("a", 0.3), ("two", 0.8)))


@pytest.mark.parametrize(
    "text, cuts",
    [
        ("a dog runs in the grass a man rides a bike two kids", ["grass", "bike"]),
        ("a man rides a bike a dog runs", []),  # 0.2 x 0.3: too weak
        ("A dog runs in the grass a man rides", []),  # cased, the next word not capitalized
        ("A dog runs in the grass A man rides", ["grass"]),
        ("A DOG RUNS IN THE GRASS A MAN RIDES A BIKE TWO KIDS", ["GRASS", "BIKE"]),
        ("A Dog Runs In The Grass A Man Rides", ["Grass"]),
        ("a dog runs in the grass, a man rides", []),  # after a mark: the writer's own
        ("a dog runs in grass 2 men a man", []),  # after a digit
    ],
)
def test_run_ons_are_cut_where_the_edges_say_a_sentence_ends(text, cuts) -> None:
    found = run_on_cuts(text, (), EDGES)
    assert [text[:s].split()[-1] for s, _ in found] == cuts
    assert all(text[s:e].isspace() for s, e in found)
    assert run_on_cuts(text, ()) == []
    parts = segment(text, "en", (), EDGES).all_sentences()
    assert [part.split()[-1] for part in parts[:-1]] == cuts and " ".join(parts) == text


def test_no_capital_opens_a_sentence_in_title_case_or_all_caps(engine: Engine) -> None:
    assert run_on_cuts("A Man Sleeps On A Bench", OPENERS) == []  # "On A" opens nothing
    assert run_on_cuts("A man sleeps on A bench", OPENERS) == [(15, 16)]
    recorder = Recorder(engine, STYLE)
    translate_text(recorder, ["A Man Sleeps On A Bench Two Dogs Play"], "en")  # type: ignore[arg-type]
    assert recorder.calls == [["A Man Sleeps On A Bench Two Dogs Play."]]


def test_segment_cuts_run_ons_and_keeps_every_character() -> None:
    text = f"  {RUN_ON.replace('bench Two', 'bench  Two')}.\nA cat sleeps A dog barks"
    found = segment(text, "en", OPENERS)
    assert found.all_sentences() == [
        "A man sleeps on a bench",
        "Two dogs play in New York",
        "The sun sets.",
        "A cat sleeps",
        "A dog barks",
    ]
    assert found.rebuild(found.all_sentences()) == text
    assert all(found.gap(i).isspace() for i in range(1, len(found)))
    assert segment(text, "en").all_sentences() == [
        text.split("\n")[0].strip(),
        "A cat sleeps A dog barks",
    ]
    for hostile in HOSTILE.values():
        again = segment(hostile, "en", OPENERS)
        assert again.rebuild(again.all_sentences()) == hostile


def test_a_long_sentence_is_cut_before_its_last_run_on_first() -> None:
    count = lambda texts: [len(t.split()) for t in texts]  # noqa: E731  (a piece a word)
    line = "A man sleeps on a bench, Two dogs play in the park The sun sets over the hills"
    assert cut_long(line, count, 14, OPENERS) == [
        "A man sleeps on a bench, Two dogs play in the park",
        "The sun sets over the hills",
    ]
    assert cut_long(line, count, 14) == [  # without openers: at the limit
        "A man sleeps on a bench, Two dogs play in the park The sun",
        "sets over the hills",
    ]


def test_closed_adds_the_final_mark_only_after_a_letter_or_digit() -> None:
    assert [closed(u, ".") for u in ["Go home", "Go 2", "Go!", "Go.", "Go 😀", "Go)", ""]] == [
        "Go home.",
        "Go 2.",
        "Go!",
        "Go.",
        "Go 😀",
        "Go)",
        "",
    ]
    assert closed("Go home", "") == "Go home"


class Recorder:
    """An engine that translates a line as itself upper-cased and records what it was given."""

    def __init__(self, engine: Engine, style: SentenceStyle, **config) -> None:
        self.src_tokenizer, self.max_source_pieces = engine.src_tokenizer, 1000
        self.unit_pieces, self.trained_pieces = 1000, None
        self.config = replace(engine.config, **config)
        self.sentence_style, self.source_words = style, SourceWords()
        self.calls: list[list[str]] = []

    def languages(self):
        return None

    def translate(self, lines, search=None, first_number=1, progress=None, constraints=None):  # noqa: ARG002
        self.calls.append(list(lines))
        return [[Translation(line.upper(), -1.0, -1.0, len(line.split()))] for line in lines]


def test_a_paragraph_is_translated_sentence_by_sentence_each_closed(engine: Engine) -> None:
    recorder = Recorder(engine, STYLE)
    (out,) = translate_text(recorder, [f"{RUN_ON}\n"], "en")  # type: ignore[arg-type]
    assert recorder.calls == [[f"{s}." for s in SENTENCES]]
    assert out == " ".join(f"{s.upper()}." for s in SENTENCES) + "\n"


@pytest.mark.parametrize(
    "style, config, sent",
    [
        (STYLE, {}, [f"{s}." for s in SENTENCES] + ["Is it?"]),
        (STYLE, {"sentence_ends": False}, [*SENTENCES, "Is it?"]),  # read as they are
        (SentenceStyle(), {}, [*SENTENCES, "Is it?"]),  # a checkpoint without the record
        (SentenceStyle(tuple(OPENERS), ""), {}, [*SENTENCES, "Is it?"]),  # no common final mark
    ],
)
def test_lines_are_closed_as_the_style_and_config_say(engine: Engine, style, config, sent) -> None:
    recorder = Recorder(engine, style, **config)
    options = TextOptions(
        split=False, style=style if recorder.config.sentence_ends else SentenceStyle()
    )
    found = translate_texts(recorder, [*SENTENCES, "Is it?"], options)  # type: ignore[arg-type]
    assert recorder.calls == [sent]
    assert [t.text for t in found] == [s.upper() for s in sent]
