"""Constrained beam search: exhaustive reference, invariants, batching, cache, ensembles."""

import dataclasses

import pytest
import torch
from search_helpers import (
    all_sequences,
    contains,
    forced_logprobs,
    in_order,
    same,
    sources,
    tiny_model,
)
from torch import Tensor, nn
from variants import variant_params

from mtkit.config import SearchConfig
from mtkit.data.tokenizer import PAD_ID, UNK_ID
from mtkit.decoding import generate
from mtkit.decoding.beam import length_penalty
from mtkit.decoding.constraints import Constraints
from mtkit.errors import MtkitError
from mtkit.model.transformer import EncoderOut

pytestmark = pytest.mark.usefixtures("one_thread")

PHRASES = [[(10, 11)], [(7,), (20, 21, 22)], [], [(30,), (30, 31)]]


def constraints(
    phrases: list[list[tuple[int, ...]]], ordered: bool = False, ends: frozenset[int] | None = None
) -> list[Constraints]:
    return [Constraints(p, ordered, ends) for p in phrases]


def exhaustive(
    model: nn.Module,
    src: Tensor,
    phrases,
    ordered: bool,
    max_len: int,
    lenpen: float,
    n: int,
    ends=None,
) -> list[tuple[float, list[int]]]:
    """The n best outputs of at most ``max_len`` tokens that meet ``phrases``, by brute force."""
    seqs = all_sequences([UNK_ID, 4, 5, 6, 7], max_len)
    met = [
        s
        for s in seqs
        if (in_order(s, phrases, ends) if ordered else all(contains(s, p, ends) for p in phrases))
    ]
    logprobs = forced_logprobs(model, src[0], met)
    scored = [
        (lp / length_penalty(len(s) + 1.0, lenpen), s) for s, lp in zip(met, logprobs, strict=True)
    ]
    return sorted(scored, key=lambda x: -x[0])[:n]


@pytest.mark.parametrize("ends", [None, frozenset({UNK_ID, 4, 5})])
@pytest.mark.parametrize("ordered", [False, True])
@pytest.mark.parametrize(
    ("phrases", "lenpen"), [([(5, 6)], 1.0), ([(7,), (4, 5)], 0.0), ([(6,), (4,)], 1.0)]
)
def test_wide_constrained_beam_equals_exhaustive_search(
    phrases, lenpen: float, ordered: bool, ends
) -> None:
    """As test_search's exhaustive test: with at most 3 tokens before EOS and a beam of 160,
    every finite candidate keeps its place whatever its bank, so the constrained search is
    exhaustive over the outputs that meet the constraints (with ``ends``: where a word ends
    after each phrase)."""
    model, src = tiny_model(vocab=8, seed=3), sources([4], vocab=8)
    cfg = SearchConfig(beam=160, nbest=4, lenpen=lenpen, min_len=0, max_len_a=0.0, max_len_b=3)
    found = generate([model], src, cfg, constraints=constraints([phrases], ordered, ends))[0]
    best = exhaustive(model, src, phrases, ordered, 3, lenpen, 4, ends)
    assert [h.tokens for h in found] == [s for _, s in best]
    assert [h.score for h in found] == pytest.approx([score for score, _ in best], abs=1e-5)


@pytest.mark.parametrize("beam", [1, 2, 5])
@pytest.mark.parametrize("ordered", [False, True])
def test_every_output_meets_its_constraints(beam: int, ordered: bool) -> None:
    model, src = tiny_model(), sources([5, 9, 2, 7])
    cfg = SearchConfig(beam=beam, nbest=beam)
    found = generate([model], src, cfg, constraints=constraints(PHRASES, ordered))
    for hyps, phrases in zip(found, PHRASES, strict=True):
        assert 1 <= len(hyps) <= beam  # fewer when the length limit comes first
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for h in hyps:
            ok = (
                in_order(h.tokens, phrases)
                if ordered
                else all(contains(h.tokens, p) for p in phrases)
            )
            assert ok, (h.tokens, phrases)
            assert sum(h.token_logprobs) == pytest.approx(h.logprob, abs=1e-5)
            assert len(h.token_logprobs) == len(h.tokens) + 1


@pytest.mark.parametrize("beam", [1, 4])
def test_no_constraints_is_plain_beam_search(beam: int) -> None:
    model, src = tiny_model(), sources([5, 9, 2, 7, 4])
    cfg = SearchConfig(beam=beam, nbest=beam, lenpen=0.6)
    plain = generate([model], src, cfg)
    same(generate([model], src, cfg, constraints=constraints([[]] * 5)), plain)


@pytest.mark.parametrize("beam", [1, 4])
def test_batched_equals_one_at_a_time_and_ensemble_of_itself(beam: int) -> None:
    model, src = tiny_model(), sources([5, 9, 2, 7])
    cfg = SearchConfig(beam=beam, nbest=beam)
    together = generate([model], src, cfg, constraints=constraints(PHRASES))
    alone = [
        generate([model], row[row.ne(PAD_ID)][None], cfg, constraints=constraints([p]))[0]
        for row, p in zip(src, PHRASES, strict=True)
    ]
    same(together, alone)
    same(generate([model, model], src, cfg, constraints=constraints(PHRASES)), together)


@dataclasses.dataclass
class Prefix:
    enc: EncoderOut  # one row per source, shared by its R / N rows
    prefix: Tensor

    def reorder(self, rows: Tensor, sources: Tensor | None = None) -> None:
        self.prefix = self.prefix.index_select(0, rows)
        if sources is not None:
            keep = self.enc.src_keep
            self.enc = EncoderOut(
                self.enc.memory.index_select(0, sources),
                None if keep is None else keep.index_select(0, sources),
            )

    def truncate(self, length: int) -> None:
        self.prefix = self.prefix[:, :length]  # the tokens fed at positions 0..length-1

    def attended(self, row: int) -> None:
        return None  # no cross-attention recorded

    def per_row(self) -> EncoderOut:
        copies = self.prefix.shape[0] // self.enc.memory.shape[0]
        keep = self.enc.src_keep
        return EncoderOut(
            self.enc.memory.repeat_interleave(copies, 0),
            None if keep is None else keep.repeat_interleave(copies, 0),
        )


class Uncached(nn.Module):
    """The model decoding its whole prefix at every step: no KV cache."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.tag_ids, self.special_ids = model.tag_ids, model.special_ids
        self.max_positions, self.tgt_vocab_size = model.max_positions, model.tgt_vocab_size

    def encode(self, src: Tensor):
        return self.model.encode(src)

    def start_state(self, enc, max_len: int) -> Prefix:
        return Prefix(enc, torch.zeros(enc.memory.shape[0], 0, dtype=torch.long))

    def decode_step(self, tokens: Tensor, state: Prefix) -> Tensor:
        state.prefix = torch.cat([state.prefix, tokens[:, None]], 1)
        return self.model.decode(state.prefix, state.per_row())[:, -1]


def test_the_cache_changes_no_constrained_output() -> None:
    model, src = tiny_model(), sources([5, 9, 2, 7])
    cfg = SearchConfig(beam=3, nbest=3)
    cached = generate([model], src, cfg, constraints=constraints(PHRASES))
    same(generate([Uncached(model)], src, cfg, constraints=constraints(PHRASES)), cached, 1e-4)


@pytest.mark.parametrize("variant", variant_params())
def test_every_variant_meets_constraints_batched_as_alone(variant: dict) -> None:
    model, src = tiny_model(**variant), sources([5, 2, 7])
    cfg = SearchConfig(beam=3)
    phrases = PHRASES[:3]
    together = generate([model], src, cfg, constraints=constraints(phrases))
    for row, p, hyps in zip(src, phrases, together, strict=True):
        assert all(contains(hyps[0].tokens, q) for q in p)
        same(
            [hyps], generate([model], row[row.ne(PAD_ID)][None], cfg, constraints=constraints([p]))
        )


def test_constraints_beyond_the_length_limit_are_refused() -> None:
    model, src = tiny_model(), sources([3, 3])
    cfg = SearchConfig(beam=2, max_len_a=0.0, max_len_b=4)
    with pytest.raises(
        MtkitError,
        match="sentence 2: its constraints need 5 target pieces, more than its length limit of 4",
    ):
        generate([model], src, cfg, constraints=constraints([[(5,)], [(5, 6, 7), (8, 9)]]))
    with pytest.raises(MtkitError, match="sampling"):
        generate([model], src, SearchConfig(sampling=True), constraints=constraints([[], []]))
