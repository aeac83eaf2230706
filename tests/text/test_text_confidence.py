"""Confidence through the text layer: units joined, spans restored, sentences rebuilt."""

from __future__ import annotations

import pytest

from mtkit.engines.base import Engine
from mtkit.engines.confidence import Confidence
from mtkit.errors import MtkitError
from mtkit.text import TextOptions, translate_texts
from mtkit.text.confidence import joined_confidence, regrouped
from mtkit.text.plan import put_back
from mtkit.text.span_masking import mask
from mtkit.text.translate import engine_units, source_limit, translate_units

pytestmark = pytest.mark.usefixtures("one_thread")

LONG = " ".join(["the man runs on a red street"] * 12)  # more pieces than the model's limit
HOSTILE = [
    "",
    "   ",
    "\ufeffa cat runs.",
    "man man. cat in on runs.\r\n\r\n  a cat small",
    "see https://x.org/a?b=1 the dog 😀",
    "@bob the dog runs on 3 streets #cats",
    "שלום the red house",
    "a.b the man",
    LONG,
    "the big dog runs",
]


def test_joined_words_take_the_pieces_of_what_they_are_made_of() -> None:
    a = Confidence((-1.0, -0.5), ((-1.0,),), -1.5)
    b = Confidence((-2.0, -3.0, -0.5), ((-2.0,), (-3.0,)), -5.5)
    glued = joined_confidence([("x", a), ("y z", b)], ["", "", "\n"])  # "xy z\n": x+y one word
    assert glued.words == ((-1.0, -2.0), (-3.0,)) and glued.logprob == -7.0
    assert glued.tokens == a.tokens + b.tokens and glued.normalized == -7.0 / 5
    spaced = joined_confidence([("x", a)], ["", ""], dropped=[b])  # b: an empty translation
    assert spaced.words == ((-1.0,),) and len(spaced.tokens) == 5


def test_restored_spans_are_copied_not_translated() -> None:
    masked = mask("see https://x.org/a now")
    assert masked.text == "see 1 now"
    sources = masked.word_sources("sehen 1 jetzt", None)
    assert masked.restore("sehen 1 jetzt", None)[0] == "sehen https://x.org/a jetzt"
    assert sources == [[0], [], [2]]
    found = regrouped(
        Confidence((-1.0, -2.0, -3.0, 0.0), ((-1.0,), (-2.0,), (-3.0,)), -6.0), sources
    )
    assert found.word_scores() == [-1.0, 0.0, -3.0] and found.normalized == -1.5
    assert mask("@bob 😀").word_sources("", None) == [[], []]  # all spans: nothing translated


@pytest.mark.parametrize("split", [True, False])
def test_every_word_of_every_text_has_a_score(engine: Engine, split: bool) -> None:
    search = engine.config.search.replace(scores=True)
    found = translate_texts(engine, HOSTILE, TextOptions(split=split), search)
    plain = translate_texts(engine, HOSTILE, TextOptions(split=split))
    assert [t.text for t in found] == [t.text for t in plain]  # scores change nothing
    assert all(t.confidence is None for t in plain)
    for t in found:
        assert t.confidence is not None
        assert len(t.confidence.word_scores()) == len(t.text.split())
    assert found[0].confidence == found[1].confidence == Confidence()  # nothing translated


def test_a_texts_score_is_over_all_its_units_pieces(engine: Engine) -> None:
    search = engine.config.search.replace(scores=True)
    units = engine_units(engine, search)
    for options in (TextOptions(), TextOptions(split=False)):
        planned, results = translate_units(
            HOSTILE, options, engine.src_tokenizer, source_limit(engine), units
        )
        texts = put_back(planned, results, scores=True)
        sizes = [len(text.all_units()) for text in planned]
        assert sizes[HOSTILE.index(LONG)] == (3 if options.split else 1)  # else truncated
        at = 0
        for text, size in zip(texts, sizes, strict=True):
            own = [hyps[0].confidence for hyps in results[at : at + size] if hyps]
            at += size
            assert text.confidence.tokens == tuple(t for c in own for t in c.tokens)
            assert text.confidence.logprob == pytest.approx(sum(c.logprob for c in own))
    assert texts[-1].confidence == results[-1][0].confidence  # one sentence: the engine's own


def test_documents_refuse_scores(engine: Engine) -> None:
    search = engine.config.search.replace(scores=True)
    with pytest.raises(MtkitError, match="scores are given per text of format 'text', not 'html'"):
        translate_texts(engine, ["<p>a cat</p>"], TextOptions(format="html"), search)
