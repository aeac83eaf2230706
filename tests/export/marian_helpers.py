"""What the hub would give, built offline: an OPUS-MT-like MarianMTModel directory.

OPUS-MT's layout: ``source.spm``/``target.spm`` with sentencepiece's own ids (unk 0, s 1,
/s 2), and a ``vocab.json`` in Marian's order, not the spm ids: ``</s>`` 0, ``<unk>`` 1, the
pieces, ``<pad>`` last; decoding starts from ``<pad>``; ``swish`` activation, shared
embeddings, scaled embeddings and a nonzero ``final_logits_bias``. The tokenizer files are
written by transformers' own MarianTokenizer (``save_pretrained``). Weights are random, then
trained for a few dozen updates on the word-substitution task of ``export_helpers`` so that
outputs are confident and end in EOS, as a real OPUS-MT model's do (a random model's
near-uniform distributions would make "same tokens" a test of float rounding).
"""

from __future__ import annotations

import io
import json
import random
import warnings
from pathlib import Path

import sentencepiece as spm
import torch
from export_helpers import TRAIN


def opus_spm(lines: list[str], vocab_size: int) -> bytes:
    """A sentencepiece model with its default ids (unk 0, bos 1, eos 2, no pad), as OPUS-MT's."""
    out = io.BytesIO()
    spm.SentencePieceTrainer.Train(
        sentence_iterator=iter(lines),
        model_writer=out,
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        minloglevel=2,
        hard_vocab_limit=False,
    )
    return out.getvalue()


def marian_order(pieces: list[str], seed: int) -> dict[str, int]:
    """``</s>`` 0, ``<unk>`` 1, the pieces in a fixed shuffled order, ``<pad>`` last."""
    rest = sorted(set(pieces) - {"<unk>", "<s>", "</s>"})
    random.Random(seed).shuffle(rest)
    return {p: i for i, p in enumerate(["</s>", "<unk>", *rest, "<pad>"])}


def pieces_of(proto: bytes) -> list[str]:
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(proto)
    return [sp.IdToPiece(i) for i in range(sp.GetPieceSize())]


def make_marian_dir(out: Path, separate: bool = False, steps: int = 100, seed: int = 0) -> Path:
    """Write an OPUS-MT-like MarianMTModel directory (``save_pretrained``) to ``out``."""
    import transformers

    out.mkdir(parents=True)
    src_spm = opus_spm([s for s, _ in TRAIN], 60)
    tgt_spm = opus_spm([t for _, t in TRAIN], 60)
    (out / "source.spm").write_bytes(src_spm)
    (out / "target.spm").write_bytes(tgt_spm)
    files = {}
    if separate:
        src_vocab = marian_order(pieces_of(src_spm), seed=1)
        tgt_vocab = marian_order(pieces_of(tgt_spm), seed=2)
        assert len(src_vocab) == len(tgt_vocab)  # one pad id (the last) for both sides
        files["target_vocab_file"] = str(out / "target_vocab.json")
        (out / "target_vocab.json").write_text(json.dumps(tgt_vocab), encoding="utf-8")
    else:
        src_vocab = tgt_vocab = marian_order(pieces_of(src_spm) + pieces_of(tgt_spm), seed=1)
    (out / "vocab.json").write_text(json.dumps(src_vocab), encoding="utf-8")
    pad = len(src_vocab) - 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Recommended: pip install sacremoses"
        tok = transformers.MarianTokenizer(
            str(out / "source.spm"),
            str(out / "target.spm"),
            str(out / "vocab.json"),
            separate_vocabs=separate,
            model_max_length=64,
            **files,
        )
    tok.save_pretrained(str(out))
    config = transformers.MarianConfig(
        vocab_size=len(src_vocab),
        decoder_vocab_size=len(tgt_vocab),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        activation_function="swish",
        scale_embedding=True,
        share_encoder_decoder_embeddings=not separate,
        tie_word_embeddings=True,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=0,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(config)
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 0.5)  # nonzero, as in OPUS-MT models
    _train(model, tok, steps)
    model.generation_config = transformers.GenerationConfig(
        decoder_start_token_id=pad,
        pad_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        bad_words_ids=[[pad]],
        max_length=64,
        num_beams=4,
    )
    model.save_pretrained(str(out))
    return out


def _train(model, tok, steps: int) -> None:
    """A few dozen Adam updates on the toy task (HF's own loss: labels, start token = pad)."""
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    rng = random.Random(0)
    model.train()
    for _ in range(steps):
        pairs = rng.sample(TRAIN, 32)
        batch = tok(
            [s for s, _ in pairs],
            text_target=[t for _, t in pairs],
            padding=True,
            return_tensors="pt",
        )
        labels = batch["labels"].masked_fill(batch["labels"].eq(tok.pad_token_id), -100)
        loss = model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels
        ).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


def hf_generate(model, tok, lines: list[str], bound: int, **kwargs) -> list[list[int]]:
    """``generate`` with mtkit's settings: at most ``bound`` tokens before EOS (max_length
    counts the start token), at least one; PAD banned by the generation config."""
    batch = tok(lines, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**batch, max_length=bound + 2, min_new_tokens=1, **kwargs)
    pad, eos = model.config.pad_token_id, model.config.eos_token_id
    return [[t for t in row.tolist()[1:] if t not in (pad, eos)] for row in out]
