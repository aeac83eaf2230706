"""Helpers the model tests share: a tiny Transformer, random batches, the cached decoding
against the full pass, a few sources and searches to compare compiled and eager decoding by."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from mtkit.config import ModelConfig, SearchConfig
from mtkit.data.tokenizer import EOS_ID, PAD_ID
from mtkit.decoding.search import generate
from mtkit.model.transformer import (
    Transformer,
    build_model,
)


def tiny(pre_norm: bool = False, src_vocab: int = 23, layers: int = 2, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = ModelConfig(
        src_vocab_size=src_vocab,
        tgt_vocab_size=29,
        d_model=32,
        ffn_dim=64,
        heads=4,
        encoder_layers=layers,
        decoder_layers=layers,
        dropout=0.0,
        attention_dropout=0.0,
        pre_norm=pre_norm,
        **kw,
    )
    return build_model(cfg).eval()


def batch(lengths: list[int], vocab: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    out = torch.full((len(lengths), max(lengths)), PAD_ID)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(4, vocab, (n,), generator=g)
        out[i, n - 1] = EOS_ID
    return out


def assert_cache_equals_full(model: Transformer, src: Tensor, tgt: Tensor) -> None:
    """Each cached decoding step's distribution equals the full teacher-forced pass's."""
    with torch.no_grad():
        enc = model.encode(src)
        full = model.decode(tgt, enc).log_softmax(-1)
        cache = model.start_state(enc, max_len=tgt.shape[1])
        for t in range(tgt.shape[1]):
            step = model.decode_step(tgt[:, t], cache).log_softmax(-1)
            torch.testing.assert_close(step, full[:, t], atol=1e-5, rtol=1e-5)


MODERN = dict(pre_norm=True, positions="rope")
# what AOTInductor compiles in tests: the demo's architecture with one layer a side (a library
# builds in ~30 s on CI's CPUs instead of ~45 s with two)
AOT = dict(MODERN, layers=1)
CPU = torch.device("cpu")
SOURCES = [batch([7, 4, 5, 9], 23), batch([6, 6], 23, seed=3), batch([3], 23, seed=4)]


def hypotheses(
    models: list[nn.Module], cfg: SearchConfig, sources: list[torch.Tensor] = SOURCES
) -> list[list[tuple]]:
    found = []
    for src in sources:
        found += [
            [(tuple(h.tokens), round(h.score, 4)) for h in hyps]
            for hyps in generate(models, src, cfg)
        ]
    return found


BEAM = SearchConfig(beam=3, nbest=2, max_len_b=8)
GREEDY = SearchConfig(beam=1, max_len_b=8)


def assert_search_equals_eager(
    eager: nn.Module, compiled: nn.Module, configs: tuple[SearchConfig, ...] = (BEAM,)
) -> None:
    """``compiled``'s hypotheses equal ``eager``'s for each search, and the steps went through
    its graph."""
    calls = []
    graph = compiled.decode_step.graph
    compiled.decode_step.graph = lambda *args: calls.append(1) or graph(*args)
    for cfg in configs:
        assert hypotheses([compiled], cfg) == hypotheses([eager], cfg)
    assert len(calls) > 20  # the steps went through the graph, not the eager fallback
