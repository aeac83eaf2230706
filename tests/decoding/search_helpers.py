"""Helpers the search tests share: tiny random models and sources, hypotheses compared, log-
probabilities by teacher forcing, exhaustive sequences, phrase checks."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import Tensor

from mtkit.config import ModelConfig
from mtkit.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from mtkit.decoding import Hypothesis
from mtkit.model.transformer import Transformer, build_model


def tiny_model(
    vocab: int = 40, seed: int = 0, layers: int = 2, max_positions: int = 128, **variant
) -> Transformer:
    torch.manual_seed(seed)
    cfg = ModelConfig(
        src_vocab_size=vocab,
        tgt_vocab_size=vocab,
        d_model=32,
        ffn_dim=64,
        heads=4,
        encoder_layers=layers,
        decoder_layers=layers,
        dropout=0.0,
        attention_dropout=0.0,
        max_positions=max_positions,
        **variant,
    )
    return build_model(cfg).eval()


def sources(lengths: list[int], vocab: int = 40, seed: int = 1) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    out = torch.full((len(lengths), max(lengths) + 1), PAD_ID)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(4, vocab, (n,), generator=g)
        out[i, n] = EOS_ID
    return out


def forced_steps(model: Transformer, src_row: Tensor, tokens: list[int]) -> list[float]:
    """log P(token) of each of tokens + EOS by teacher forcing, the source without padding."""
    src = src_row[src_row.ne(PAD_ID)][None]
    tgt = torch.tensor([[BOS_ID, *tokens]])
    with torch.no_grad():
        lprobs = model.decode(tgt, model.encode(src)).log_softmax(-1)[0]  # (T, V)
    gold = torch.tensor([*tokens, EOS_ID])
    return lprobs.gather(1, gold[:, None])[:, 0].tolist()


def forced_logprob(model: Transformer, src_row: Tensor, tokens: list[int]) -> float:
    """Sum of log P(token) over tokens + EOS by teacher forcing."""
    return sum(forced_steps(model, src_row, tokens))


def forced_logprobs(model: Transformer, src_row: Tensor, seqs: list[list[int]]) -> list[float]:
    """forced_logprob for many target sequences in one batch (right padding is harmless)."""
    width = max(len(s) for s in seqs) + 1
    tgt = torch.full((len(seqs), width), PAD_ID)
    gold = torch.full((len(seqs), width), PAD_ID)
    for i, seq in enumerate(seqs):
        tgt[i, : len(seq) + 1] = torch.tensor([BOS_ID, *seq])
        gold[i, : len(seq) + 1] = torch.tensor([*seq, EOS_ID])
    src = src_row[src_row.ne(PAD_ID)][None].expand(len(seqs), -1)
    with torch.no_grad():
        lprobs = model.decode(tgt, model.encode(src)).log_softmax(-1)  # (N, T, V)
    picked = lprobs.gather(2, gold[:, :, None])[:, :, 0].masked_fill(gold.eq(PAD_ID), 0.0)
    return picked.sum(1).tolist()


def same(a: list[list[Hypothesis]], b: list[list[Hypothesis]], tol: float = 1e-5) -> None:
    assert [[h.tokens for h in row] for row in a] == [[h.tokens for h in row] for row in b]
    for row_a, row_b in zip(a, b, strict=True):
        for x, y in zip(row_a, row_b, strict=True):
            assert x.score == pytest.approx(y.score, abs=tol)
            assert x.logprob == pytest.approx(y.logprob, abs=tol)


def all_sequences(tokens: list[int], max_len: int) -> list[list[int]]:
    return [list(s) for n in range(max_len + 1) for s in itertools.product(tokens, repeat=n)]


def occurs(seq: list[int], phrase: tuple[int, ...], i: int, ends=None) -> bool:
    """``phrase`` at position i of ``seq``, a word ending after it (the output's end, or one
    of the pieces ``ends``) when ``ends`` are given."""
    n = len(phrase)
    if tuple(seq[i : i + n]) != phrase:
        return False
    return ends is None or i + n == len(seq) or seq[i + n] in ends


def contains(seq: list[int], phrase: tuple[int, ...], ends=None) -> bool:
    return any(occurs(seq, phrase, i, ends) for i in range(len(seq) - len(phrase) + 1))


def in_order(seq: list[int], phrases: list[tuple[int, ...]], ends=None) -> bool:
    """Each phrase after the end of the one before (no overlap), leftmost first."""
    at = 0
    for phrase in phrases:
        n = len(phrase)
        starts = [i for i in range(at, len(seq) - n + 1) if occurs(seq, phrase, i, ends)]
        if not starts:
            return False
        at = starts[0] + n
    return True
