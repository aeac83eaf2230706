"""Alignments carried from units to sentences to texts, and `mtkit translate --alignment`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from text_helpers import HOSTILE

from mtkit.cli import cli
from mtkit.config import SearchConfig
from mtkit.engines.base import Engine
from mtkit.text import TextOptions, segment, translate_texts
from mtkit.text.aligned import Part, joined, located, word_starts

pytestmark = pytest.mark.usefixtures("one_thread")
ALIGNED = SearchConfig(beam=2, max_len_a=1.0, max_len_b=2, alignment=True)


def test_words_of_pieces_are_found_by_offset_in_the_whole() -> None:
    assert word_starts("  ab c\td ") == [2, 5, 7] and word_starts("") == []
    source = "one two. three four"
    pieces = [
        Part("one two.", 0, "eins zwei.", ((0, 0), (1, 1))),
        Part("three four", 9, "drei vier", ((0, 1), (1, 0))),
    ]
    assert joined(source, pieces, ["", " ", ""]) == (
        "eins zwei. drei vier",
        ((0, 0), (1, 1), (2, 3), (3, 2)),
    )
    # no space between two sentences: their words are one word of the whole text
    glued = [Part("Hi.", 0, "Hallo.", ((0, 0),)), Part("Go", 3, "Geh", ((0, 0),))]
    assert joined("Hi.Go now", glued, ["", "", " jetzt"]) == ("Hallo.Geh jetzt", ((0, 0),))
    # a piece without alignment: the whole has none, the text is still joined
    assert joined(source, [pieces[0], Part("three four", 9, "x", None)], ["", " ", ""]) == (
        "eins zwei. x",
        None,
    )
    assert located("abc abc d", ["abc", "abc", "d"]) == [0, 4, 8]


def test_a_texts_pairs_are_its_sentences_pairs_shifted(engine: Engine) -> None:
    text = "man man. cat in on runs.\n\n  a cat small big blue house."
    (found,) = translate_texts(engine, [text], TextOptions("en"), ALIGNED)
    sentences = segment(text, "en").all_sentences()
    alone = engine.translate(sentences, ALIGNED)
    expected, src_at, tgt_at = set(), 0, 0
    for sentence, hyps in zip(sentences, alone, strict=True):
        expected |= {(i + src_at, j + tgt_at) for i, j in hyps[0].alignment}
        src_at, tgt_at = src_at + len(sentence.split()), tgt_at + len(hyps[0].text.split())
    assert found.alignment == tuple(sorted(expected)) and found.alignment
    assert found.text.split() == [w for hyps in alone for w in hyps[0].text.split()]


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_texts_align_within_their_words(engine: Engine, name: str) -> None:
    text = HOSTILE[name]
    (found,) = translate_texts(engine, [text], TextOptions("en"), ALIGNED)
    assert found.alignment is not None
    assert all(
        0 <= i < len(text.split()) and 0 <= j < len(found.text.split()) for i, j in found.alignment
    )


def test_translate_writes_translation_tab_alignment(text_ckpt: Path, tmp_path: Path) -> None:
    lines = ["man man. cat in on runs.", "", "a cat small big blue house."]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = [
        "translate",
        "-q",
        "-m",
        str(text_ckpt),
        "-i",
        str(tmp_path / "in.txt"),
        "--threads",
        "1",
        "--beam",
        "2",
        "--max-len-a",
        "1.0",
        "--max-len-b",
        "2",
    ]
    plain = CliRunner().invoke(cli, args)
    for extra in ([], ["--split-sentences"]):
        result = CliRunner().invoke(cli, args + ["--alignment"] + extra)
        assert result.exit_code == 0, result.output
        rows = result.stdout.splitlines()
        assert len(rows) == len(lines) and all(row.count("\t") == 1 for row in rows)
        for row, line in zip(rows, lines, strict=True):
            text, pairs = row.split("\t")
            for pair in pairs.split():
                i, j = map(int, pair.split("-"))
                assert i < len(line.split()) and j < len(text.split())
        if not extra:
            assert [row.split("\t")[0] for row in rows] == plain.stdout.splitlines()
    nbest = CliRunner().invoke(cli, args + ["--alignment", "--nbest", "2"])
    assert nbest.exit_code == 0 and all(r.count("\t") == 5 for r in nbest.stdout.splitlines())
