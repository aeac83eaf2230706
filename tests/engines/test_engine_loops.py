"""The native engine and its guard with searches that stop loops: a translation the search
stopped is degenerate whatever its text, so the guard translates its line again; a loop its
source spells is searched again without stops; searches the guard does not retry never stop."""

from __future__ import annotations

from dataclasses import replace

import pytest
from engine_helpers import LINES

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.engines import load_engine

pytestmark = pytest.mark.usefixtures("one_thread")


def looping(engine, monkeypatch, loops):
    """``engine`` whose searches with stops hand out every input stopped in a loop of 9 of
    the piece ``loops(row)`` gives (None: searched as it is); the calls, as (rows, stop)."""
    real, calls = engine._searched, []

    def searched(models, rows, src, search, constraints, stop):
        found = real(models, rows, src, search, constraints, stop)
        calls.append((len(rows), search.no_repeat_ngram, stop))
        if not stop:
            return found
        return [
            hyps if loops(row) is None else [replace(h, looped=(loops(row), 9)) for h in hyps]
            for row, hyps in zip(rows, found, strict=True)
        ]

    monkeypatch.setattr(engine, "_searched", searched)
    return calls


def test_a_stopped_translation_is_translated_again(engine_ckpt, monkeypatch, capsys) -> None:
    engine = load_engine([str(engine_ckpt)], TranslateConfig(threads=1))
    lines = [line.lower() for line in LINES[:3]]
    banned = SearchConfig(no_repeat_ngram=3, guard=False)
    expected = [h[0].text for h in engine.translate(lines, banned)]
    token = engine.tgt_tokenizer.encode(["x"])[0][-1]
    calls = looping(engine, monkeypatch, lambda row: token)
    found = engine.translate(lines)
    assert [h[0].text for h in found] == expected
    assert [h[0].guard for h in found] == ["norepeat"] * 3
    assert calls == [(3, 0, True), (3, 3, False)]  # the retry bans repeats: no stops
    piece = engine.tgt_tokenizer.id_to_piece(token)
    err = capsys.readouterr().err
    assert err.count(f"a degenerate translation (a run of 9 pieces {piece!r})") == 3


def test_a_loop_the_source_spells_is_searched_again_without_stops(
    engine_ckpt, monkeypatch, capsys
) -> None:
    engine = load_engine([str(engine_ckpt)], TranslateConfig(threads=1))
    piece = engine.tgt_tokenizer.piece_to_id
    word = next(
        w
        for w in ("rot", "blau", "katze")
        if engine.tgt_tokenizer.id_to_piece(piece(f"\u2581{w}")) == f"\u2581{w}"
    )  # a target piece that is a whole word
    spelled = piece(f"\u2581{word}")
    lines = [LINES[0].lower(), f"{LINES[1].lower()} {' '.join([word] * 9)}"]
    expected = engine.translate(lines)
    ids = engine.src_tokenizer.encode([lines[1]])[0]
    calls = looping(engine, monkeypatch, lambda row: spelled if row == ids else None)
    assert engine.translate(lines) == expected  # searched again: nothing stopped
    assert calls[:2] == [(2, 0, True), (1, 0, False)]
    assert "degenerate" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "search",
    [
        SearchConfig(guard=False),
        SearchConfig(no_repeat_ngram=4),
        SearchConfig(alignment=True),
    ],
)
def test_searches_the_guard_does_not_retry_never_stop(engine_ckpt, monkeypatch, search) -> None:
    engine = load_engine([str(engine_ckpt)], TranslateConfig(threads=1))
    calls = looping(engine, monkeypatch, lambda row: 5)
    engine.translate(LINES[:2], search)
    assert calls and not any(stop for *_, stop in calls)
