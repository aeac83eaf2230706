"""The longest source a model was trained on: recorded by training, kept by its checkpoint,
and the engines' cut: a longer line is cut by the text layer into parts at that length, each
translated (not truncated, not decoded past what the model ever saw)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from engine_helpers import LINES, engine_config

from mtkit.checkpoint import Checkpoint
from mtkit.config import TranslateConfig
from mtkit.data.binarized import ParallelData, load_tokenizers
from mtkit.data.sentence_edges import edges_of
from mtkit.data.sentence_style import SentenceStyle, style_of, typical_length
from mtkit.data.source_words import SourceWords, words_of
from mtkit.engines import load_engine
from mtkit.errors import MtkitError
from mtkit.pipeline.translate import translate_with
from mtkit.text.segment import cut_long


def test_training_records_its_longest_source(multi_run: Path, multi_dataset: Path) -> None:
    ckpt = Checkpoint.load(multi_run / "checkpoint_last.pt")
    longest = ParallelData(multi_dataset, "train").longest_source()
    assert longest and ckpt.source_pieces == longest  # its tag counted, as the engine counts
    assert load_engine(
        [str(multi_run / "checkpoint_last.pt")], TranslateConfig()
    ).unit_pieces == min(longest, ckpt.model_config.max_positions - 1)


def with_length(engine_ckpt: Path, tmp_path: Path, pieces: int | None) -> Path:
    ckpt = Checkpoint.load(engine_ckpt)
    ckpt.source_pieces = pieces
    path = tmp_path / f"cut-{pieces}.pt"
    ckpt.save(path)
    return path


def test_a_longer_line_is_cut_into_parts_at_the_trained_length(
    engine_ckpt: Path, tmp_path: Path, capsys
) -> None:
    engine = load_engine([str(with_length(engine_ckpt, tmp_path, 9))], TranslateConfig())
    assert engine.trained_pieces == 9 and engine.unit_pieces == 9
    line = " ".join(LINES[:4])  # far more than 9 pieces
    count = lambda texts: [len(ids) for ids in engine.src_tokenizer.encode(texts)]  # noqa: E731
    parts = cut_long(line, count, 9)
    assert len(parts) > 2
    capsys.readouterr()
    [whole] = translate_with(engine, [line])
    assert f"cut into {len(parts)} parts" in capsys.readouterr().err
    assert whole == " ".join(translate_with(engine, parts))  # every part, none truncated
    untouched = load_engine([str(engine_ckpt)], TranslateConfig())  # nothing recorded
    assert untouched.trained_pieces is None
    assert (
        untouched.unit_pieces
        == untouched.max_source_pieces
        == min(1000, untouched.max_positions - 1)
    )


def test_a_longer_line_is_cut_into_parts_of_the_typical_training_length(
    engine_ckpt: Path, tmp_path: Path
) -> None:
    """A run-on longer than the trained length goes in parts of the sources' typical length
    (a part at the longest would hold several sentences' worth)."""
    ckpt = Checkpoint.load(with_length(engine_ckpt, tmp_path, 9))
    ckpt.sentence_style = SentenceStyle(length=4)
    ckpt.save(tmp_path / "typical.pt")
    engine = load_engine([str(tmp_path / "typical.pt")], TranslateConfig())
    line = " ".join(LINES[:4]).lower().replace(".", "")
    count = lambda texts: [len(ids) for ids in engine.src_tokenizer.encode(texts)]  # noqa: E731
    parts = cut_long(line, count, 4)
    assert len(parts) > len(cut_long(line, count, 9)) and max(count(parts)) <= 4
    [whole] = translate_with(engine, [line])
    assert whole == " ".join(translate_with(engine, parts))
    # a line within the trained length stays whole however long the typical sentence is
    short = next(p for p in cut_long(line, count, 9) if count([p])[0] > 4)
    assert translate_with(engine, [short]) == translate_with(
        load_engine([str(with_length(engine_ckpt, tmp_path, 9))], TranslateConfig()), [short]
    )


def test_a_longer_run_on_is_cut_where_the_recorded_edges_say_sentences_end(
    engine_ckpt: Path, tmp_path: Path
) -> None:
    """With the training sentences' edges recorded, a run-on longer than the trained length
    goes in parts cut where its sentences most likely end, not at the length."""
    ckpt = Checkpoint.load(with_length(engine_ckpt, tmp_path, 9))
    edges = edges_of(LINES)
    ckpt.sentence_style = SentenceStyle(edges=edges)
    ckpt.save(tmp_path / "edges.pt")
    engine = load_engine([str(tmp_path / "edges.pt")], TranslateConfig())
    assert engine.sentence_style.edges == edges
    line = " ".join(LINES[:4])
    count = lambda texts: [len(ids) for ids in engine.src_tokenizer.encode(texts)]  # noqa: E731
    parts = cut_long(line, count, 9, edges=edges)
    assert parts != cut_long(line, count, 9) and max(count(parts)) <= 9
    [whole] = translate_with(engine, [line])
    assert whole == " ".join(translate_with(engine, parts))


def test_a_longer_line_is_translated_sentence_by_sentence(
    engine_ckpt: Path, tmp_path: Path, capsys
) -> None:
    """A line longer than the trained length goes in its own sentences (as --split-sentences
    cuts them), not in parts of several at that length; a line within it stays whole."""
    engine = load_engine([str(with_length(engine_ckpt, tmp_path, 13))], TranslateConfig())
    sentences = [f"{line.capitalize()}." for line in LINES[:3]]
    count = lambda texts: [len(ids) for ids in engine.src_tokenizer.encode(texts)]  # noqa: E731
    assert max(count(sentences)) <= 13 < count([" ".join(sentences)])[0] <= 31  # (positions)
    assert cut_long(" ".join(sentences), count, 13) != sentences  # the old parts: mid-sentence
    [whole] = translate_with(engine, [" ".join(sentences)])
    assert whole == " ".join(translate_with(engine, sentences))
    # ALL CAPS and Title Case are measured lowercased, as the guard translates them: in their
    # own sentences where that is too long (their capitals open none), whole where it fits
    upper, title = " ".join(sentences).upper(), " ".join(sentences[:2]).title()
    assert 13 < count([upper.lower()])[0] and count([title.lower()])[0] <= 13 < count([title])[0]
    [found] = translate_with(engine, [upper])
    assert found == " ".join(translate_with(engine, [s.upper() for s in sentences]))
    capsys.readouterr()
    [found] = translate_with(engine, [title])
    assert "cut into" not in capsys.readouterr().err
    # without the guard (they are translated as they are): cut at the length as they are
    unguarded = load_engine(
        [str(with_length(engine_ckpt, tmp_path, 13))], TranslateConfig.from_flat({"guard": False})
    )
    for cased in (upper, title):
        assert 13 < count([cased])[0] <= 31
        [found] = translate_with(unguarded, [cased])
        assert found == " ".join(translate_with(unguarded, cut_long(cased, count, 13)))
    two = " ".join(sentences[:2])
    assert count([two])[0] <= 13 and translate_with(engine, [two]) != [
        " ".join(translate_with(engine, sentences[:2]))
    ]


@pytest.mark.parametrize("bad", ["9", 0, True, 2.5])
def test_a_bad_recorded_length_is_refused_in_one_line(engine_ckpt, tmp_path, bad) -> None:
    from mtkit.checkpoint.storage import load_checkpoint

    payload = load_checkpoint(engine_ckpt)
    payload["source_pieces"] = bad
    with pytest.raises(MtkitError, match=r"^x.pt: source_pieces must be a positive integer"):
        Checkpoint.from_payload(payload, "x.pt")


def test_training_records_its_sources_sentence_style(
    multi_run: Path, multi_dataset: Path, engine_ckpt: Path, tmp_path: Path
) -> None:
    ckpt = Checkpoint.load(multi_run / "checkpoint_last.pt")
    data = ParallelData(multi_dataset, "train")
    src, _ = load_tokenizers(multi_dataset)
    texts = src.decode(data.side("src", i) for i in range(len(data)))
    typical = sorted(len(data.side("src", i)) for i in range(len(data)))[len(data) * 95 // 100]
    assert typical == typical_length(data) > 0
    assert texts[0].startswith(">>")
    assert ckpt.sentence_style == replace(style_of(texts), length=typical)
    assert ckpt.source_words == words_of(texts) and "dog" in ckpt.source_words.rank
    assert not any(w.startswith(">>") for w in ckpt.sentence_style.openers)
    engine = load_engine([str(multi_run / "checkpoint_last.pt")], TranslateConfig())
    assert engine.sentence_style == ckpt.sentence_style
    assert engine.source_words == ckpt.source_words
    # a checkpoint without the record: none, and none written back
    old = Checkpoint.load(engine_ckpt)
    assert old.sentence_style == SentenceStyle() and "sentence_style" not in old.to_payload()
    assert old.source_words == SourceWords() and "source_words" not in old.to_payload()
    old.sentence_style, old.source_words = SentenceStyle(("A",), "."), SourceWords(("a",))
    old.save(tmp_path / "styled.pt")
    again = Checkpoint.load(tmp_path / "styled.pt")
    assert (again.sentence_style, again.source_words) == (old.sentence_style, old.source_words)


def test_the_records_reach_every_engine(engine_ckpt: Path, tmp_path: Path) -> None:
    """The CTranslate2 export carries them in mtkit.json; --workers' engine has the model's."""
    pytest.importorskip("ctranslate2")
    from mtkit.export.ct2 import export_ct2

    ckpt = Checkpoint.load(engine_ckpt)
    ckpt.sentence_style = SentenceStyle(("A",), ".", 7)
    ckpt.source_words = SourceWords(("a", "b"))
    ckpt.save(tmp_path / "recorded.pt")
    out = export_ct2(tmp_path / "recorded.pt", tmp_path / "ct2")
    for kind in ("ctranslate2", "mtkit-2-workers"):
        model = str(out if kind == "ctranslate2" else tmp_path / "recorded.pt")
        engine = load_engine([model], engine_config(kind))
        assert engine.sentence_style == ckpt.sentence_style, kind
        assert engine.source_words == ckpt.source_words, kind
