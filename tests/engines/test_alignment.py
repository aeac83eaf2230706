"""Word alignments: pieces to words, the layer, and every engine giving the same pairs."""

from __future__ import annotations

import pytest
import torch
from engine_helpers import LINES

from mtkit.checkpoint import load_for_inference
from mtkit.config import SearchConfig, alignment_layer
from mtkit.decoding.batching import pad_batch
from mtkit.engines.alignment import moses, word_alignment, word_indices
from mtkit.engines.base import Engine
from mtkit.errors import MtkitError

pytestmark = pytest.mark.usefixtures("one_thread")
ALIGNED = SearchConfig(beam=2, max_len_a=1.0, max_len_b=2, alignment=True)


def test_a_piece_starting_with_the_marker_starts_a_word() -> None:
    assert word_indices(["▁Ein", "▁Ha", "us", "▁", ".", "▁x"]) == [0, 1, 1, 2, 2, 3]
    assert word_indices(["ab", "c", "▁d"]) == [0, 0, 1]  # the first piece starts word 0 anyway


def test_each_target_piece_takes_the_source_piece_it_attends_to_most() -> None:
    src, tgt = ["▁a", "▁b", "c"], ["▁X", "y", "▁Z"]
    attention = [
        [0.1, 0.2, 0.3, 0.9],  # the last column, the source EOS, is never chosen
        [0.6, 0.3, 0.1, 0.0],
        [0.0, 0.5, 0.4, 0.1],
        [1.0, 0.0, 0.0, 0.0],  # the last row, the EOS step, is ignored
    ]
    assert word_alignment(src, tgt, attention) == ((0, 0), (1, 0), (1, 1))
    # a target-language tag is not a word and never chosen
    tagged = [[0.9, 0.05, 0.05]] * 2
    assert word_alignment(["▁>>de<<", "▁a", "▁b"], ["▁X", "▁Y"], tagged, tagged=True) == (
        (0, 0),
        (0, 1),
    )
    # indices stay below the texts' word counts
    assert word_alignment(src, tgt, attention, src_words=1, tgt_words=1) == ((0, 0),)
    assert word_alignment([], tgt, attention) == () and moses(((0, 1), (2, 0))) == "0-1 2-0"


@pytest.mark.parametrize(
    ("asked", "layers", "index"),
    [(-2, 6, 4), (-1, 6, 5), (0, 6, 0), (5, 6, 5), (-6, 6, 0), (-1, 1, 0), (0, 1, 0)],
)
def test_the_layer_counts_from_the_top_when_negative(asked: int, layers: int, index: int) -> None:
    assert alignment_layer(asked, layers) == index


@pytest.mark.parametrize(("asked", "layers"), [(6, 6), (-7, 6), (1, 1), (-2, 1), (-3, 2)])
def test_a_layer_the_model_lacks_is_named(asked: int, layers: int) -> None:
    with pytest.raises(MtkitError, match=f"--alignment-layer {asked}: the model has {layers}"):
        alignment_layer(asked, layers)


def test_the_native_engine_aligns_with_the_layers_attention(load_kind, engine_ckpt) -> None:
    engine = load_kind("mtkit", alignment_layer=0)
    results = engine.translate(LINES[:6], ALIGNED)
    model = load_for_inference(str(engine_ckpt)).model.eval()
    ids, piece = engine.src_tokenizer.specials, engine.src_tokenizer.id_to_piece
    for line, hyps in zip(LINES[:6], results, strict=True):
        best = hyps[0]
        row = engine.src_tokenizer.encode_one(line)
        tokens = engine.tgt_tokenizer.encode_one(best.text)
        src = pad_batch([row + [ids.eos]], torch.device("cpu"), ids.pad)
        tgt_in = pad_batch([[ids.bos] + tokens], torch.device("cpu"), ids.pad)
        with torch.inference_mode():
            probs = model.cross_attention(src, tgt_in, 0)[0].tolist()
        expected = word_alignment(
            [piece(t) for t in row],
            [piece(t) for t in tokens],
            probs,
            tgt_words=len(best.text.split()),
        )
        assert best.alignment == expected and best.alignment
        assert {j for _, j in best.alignment} == set(range(len(best.text.split())))
        assert all(i < len(line.split()) for i, _ in best.alignment)


def test_alignments_change_no_translation(engine: Engine) -> None:
    plain = engine.translate(LINES, engine.config.search)
    aligned = engine.translate(LINES, engine.config.search.replace(alignment=True))
    assert [[h.text for h in hyps] for hyps in aligned] == [
        [h.text for h in hyps] for hyps in plain
    ]
    assert all(h.alignment is None for hyps in plain for h in hyps)
    assert all(h.alignment for hyps in aligned for h in hyps if h.text)


def test_ctranslate2_gives_the_native_engines_pairs(load_kind) -> None:
    pytest.importorskip("ctranslate2")
    search = SearchConfig(beam=1, max_len_a=1.0, max_len_b=2, alignment=True)
    native = load_kind("mtkit").translate(LINES, search)
    ct2 = load_kind("ctranslate2").translate(LINES, search)
    assert [h[0].text for h in ct2 if h] == [h[0].text for h in native if h]
    assert [h[0].alignment for h in ct2 if h] == [h[0].alignment for h in native if h]


def test_ctranslate2_refuses_another_layer_than_exported(load_kind) -> None:
    pytest.importorskip("ctranslate2")
    engine = load_kind("ctranslate2", alignment_layer=0)  # exported: the last of 2, 1
    with pytest.raises(MtkitError, match="exported to align with decoder layer"):
        engine.translate(LINES[:1], SearchConfig(beam=1, alignment=True))
