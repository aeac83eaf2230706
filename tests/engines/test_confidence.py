"""Confidence: pieces to words, the sentence scores, and every engine giving the same ones."""

from __future__ import annotations

import math

import pytest
from engine_helpers import LINES

from mtkit.engines.base import Engine
from mtkit.engines.confidence import Confidence, piece_confidence

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_worked_example() -> None:
    found = piece_confidence(["▁Ein", "▁Ha", "us"], [-0.1, -1.0, -0.2, -0.3], 2)
    assert found.words == ((-0.1,), (-1.0, -0.2)) and found.tokens == (-0.1, -1.0, -0.2, -0.3)
    assert found.word_scores() == pytest.approx([-0.1, -0.6])
    assert found.normalized == pytest.approx(-0.4) and found.logprob == pytest.approx(-1.6)
    assert found.probability == pytest.approx(math.exp(-0.4))
    assert found.mean_prob == pytest.approx(sum(map(math.exp, found.tokens)) / 4)
    assert found.min_prob == pytest.approx(math.exp(-1.0))


def test_words_stay_within_the_texts_words() -> None:
    # a lone "▁" joins the last word; a text word without a piece gets none (scores 0)
    assert piece_confidence(["▁a", "▁"], [-1.0, -2.0, 0.0], 1).words == ((-1.0, -2.0),)
    assert piece_confidence(["▁a"], [-1.0, 0.0], 2).word_scores() == [-1.0, 0.0]
    # the unknown piece is written " ⁇ ": a word of its own, and the piece after it starts one
    unk = piece_confidence(["▁a", "<unk>", "s"], [-1.0, -2.0, -3.0, 0.0], 3, unk="<unk>")
    assert unk.words == ((-1.0,), (-2.0,), (-3.0,))
    with pytest.raises(ValueError, match="3 log-probabilities for 1 pieces"):
        piece_confidence(["▁a"], [-1.0, 0.0, 0.0], 1)


def test_nothing_translated_is_certain() -> None:
    assert (Confidence().normalized, Confidence().mean_prob, Confidence().probability) == (
        0.0,
        1.0,
        1.0,
    )
    assert piece_confidence([], [-0.5], 0) == Confidence((-0.5,), (), -0.5)


def test_the_search_total_is_kept_to_the_last_bit() -> None:
    found = piece_confidence(["▁a"], [-0.1, -0.2], 1, total=-0.30000001)
    assert found.normalized == -0.30000001 / 2


def test_scores_change_no_translation_and_add_up(engine: Engine) -> None:
    search = engine.config.search
    plain = engine.translate(LINES, search)
    scored = engine.translate(LINES, search.replace(scores=True))
    assert [[h.text for h in hyps] for hyps in scored] == [[h.text for h in hyps] for hyps in plain]
    assert all(h.confidence is None for hyps in plain for h in hyps)
    for hyps in scored:
        for h in hyps:
            found = h.confidence
            assert found is not None and len(found.tokens) == h.tokens + 1  # EOS last
            assert len(found.words) == len(found.word_scores()) == len(h.text.split())
            assert sum(len(w) for w in found.words) == h.tokens  # every piece in one word
            assert math.fsum(found.tokens) == pytest.approx(found.logprob, abs=1e-4)
            assert all(t <= 0 for t in found.tokens)


def test_every_engine_scores_as_mtkit_does(engine: Engine, load_kind) -> None:
    """CTranslate2 (greedy here) re-scores its hypotheses with score_batch: the same model
    log-probabilities as mtkit's greedy search, piece by piece."""
    native = load_kind("mtkit", beam=engine.config.search.width)
    search = engine.config.search.replace(scores=True)
    for mine, theirs in zip(
        native.translate(LINES, search), engine.translate(LINES, search), strict=True
    ):
        assert mine[0].text == theirs[0].text
        a, b = mine[0].confidence, theirs[0].confidence
        assert a is not None and b is not None and len(a.words) == len(b.words)
        assert a.tokens == pytest.approx(b.tokens, abs=1e-4)
    if engine.config.engine == "mtkit":  # the search's own sum: the n-best score, exactly
        for hyps in engine.translate(LINES, search):
            assert hyps[0].confidence.normalized == hyps[0].score  # lenpen 1, fairseq
