"""A byte-fallback vocabulary (`mtkit spm train --byte-fallback`) through both engines and both
exports: characters the sentencepiece model never saw go in and come out as byte pieces.

The model learns to write "hund 🐶" for "dog" from a sentencepiece model trained without the
emoji, so 🐶 is four byte pieces in every target; the source may hold any character."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from export_helpers import DICT, Ckpt, _train_steps, corpus, greedy_reference

from mtkit.checkpoint import save_checkpoint
from mtkit.config import ModelConfig, TranslateConfig
from mtkit.data.tokenizer import BOS_ID, EOS_ID, UNK_ID, Tokenizer, train_spm
from mtkit.engines import load_engine
from mtkit.engines.base import best_texts
from mtkit.model.transformer import build_model

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

EMOJI = "🐶"
PAIRS = [(s, t.replace(DICT["dog"], f"{DICT['dog']} {EMOJI}")) for s, t in corpus(600, seed=3)]
LINES = ["the dog runs", "a big dog walks on the street", "the dog 🐶 runs ☃", "犬 dog"]


@pytest.fixture(scope="module")
def bf_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Ckpt:
    """A joint byte-fallback vocabulary (no emoji in its training text), a model trained on
    PAIRS for 200 steps."""
    tok = Tokenizer(
        train_spm([x for s, t in corpus(600, seed=3) for x in (s, t)], 300, byte_fallback=True)
    )
    assert tok.byte_fallback and EMOJI not in tok.pieces_by_id()
    cfg = ModelConfig(
        src_vocab_size=len(tok),
        tgt_vocab_size=len(tok),
        d_model=32,
        ffn_dim=64,
        heads=4,
        encoder_layers=2,
        decoder_layers=2,
        dropout=0.0,
        attention_dropout=0.0,
        max_positions=64,
        share_all_embeddings=True,
    )
    torch.manual_seed(0)
    model = build_model(cfg)
    xs = [ids + [EOS_ID] for ids in tok.encode([s for s, _ in PAIRS])]
    ys = [ids + [EOS_ID] for ids in tok.encode([t for _, t in PAIRS])]
    model.train()
    _train_steps(
        model,
        torch.optim.Adam(model.parameters(), lr=3e-3),
        xs,
        ys,
        torch.Generator().manual_seed(0),
        200,
    )
    model.eval()
    path = tmp_path_factory.mktemp("bf") / "bf.pt"
    save_checkpoint(
        {
            "model_config": asdict(cfg),
            "model": model.state_dict(),
            "spm": {"src": tok.proto, "tgt": tok.proto},
        },
        path,
    )
    return Ckpt(path, model, tok, tok)


def greedy(ck: Ckpt, lines: list[str], bound: int = 30) -> list[str]:
    return [
        ck.tgt.decode([greedy_reference(ck.model, ids, bound)])[0] for ids in ck.src.encode(lines)
    ]


def test_the_vocabulary_holds_no_unk_for_any_source(bf_ckpt: Ckpt) -> None:
    ids = bf_ckpt.src.encode(LINES)
    assert all(UNK_ID not in row for row in ids)
    assert bf_ckpt.src.decode(ids) == LINES


def test_the_model_writes_the_emoji_as_bytes(bf_ckpt: Ckpt) -> None:
    emoji = [bf_ckpt.tgt.piece_to_id(f"<0x{b:02X}>") for b in EMOJI.encode()]
    for ids in bf_ckpt.src.encode(LINES[:2]):
        out = greedy_reference(bf_ckpt.model, ids, 30)
        assert any(out[i : i + 4] == emoji for i in range(len(out)))
    assert all(EMOJI in line for line in greedy(bf_ckpt, LINES[:2]))


def test_ctranslate2_export_writes_and_reads_byte_pieces(bf_ckpt: Ckpt, tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2", reason="needs the 'ct2' extra")
    from mtkit.export.ct2 import export_ct2

    out = export_ct2(bf_ckpt.path, tmp_path / "ct2")
    vocab = (out / "shared_vocabulary.json").read_text("utf-8")
    assert '"<0xF0>"' in vocab and '"<0x00>"' in vocab
    cfg = TranslateConfig.from_flat(
        {"engine": "ctranslate2", "beam": 1, "max_len_a": 0, "max_len_b": 30, "device": "cpu"}
    )
    assert best_texts(load_engine([str(out)], cfg).translate(LINES)) == greedy(bf_ckpt, LINES)


def test_hugging_face_export_encodes_and_decodes_bytes(bf_ckpt: Ckpt, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra")
    from mtkit.export.hf import export_hf

    export_hf(bf_ckpt.path, tmp_path / "hf")
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    for line in LINES:
        ids = hf_tok(line)["input_ids"]
        assert ids == bf_ckpt.src.encode_one(line) + [EOS_ID]
        assert hf_tok.decode(ids, skip_special_tokens=True) == line
    for ids in bf_ckpt.src.encode(LINES):
        out = [BOS_ID, *greedy_reference(bf_ckpt.model, ids, 30), EOS_ID]
        assert hf_tok.decode(out, skip_special_tokens=True) == bf_ckpt.tgt.decode([out])[0]


def test_argos_reads_the_bytes_with_the_one_model(bf_ckpt: Ckpt) -> None:
    """Argos decodes target pieces with the source model: a joint one reads every byte piece."""
    from mtkit.export.argos import check_one_spm

    check_one_spm(bf_ckpt.src, bf_ckpt.tgt)
