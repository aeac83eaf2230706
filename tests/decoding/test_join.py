"""Inputs joining a running search (the server's step-level batching): each comes out exactly
as decoded alone, whenever it joins, whatever else is decoding beside it, and an input dropped
mid-way is never handed out while the others are untouched."""

from __future__ import annotations

import pytest
import torch

from mtkit.config import SearchConfig
from mtkit.decoding.beam_search import BeamSearch, filled
from mtkit.decoding.ensemble import Ensemble
from mtkit.decoding.greedy import GreedySearch
from mtkit.decoding.search import generate
from mtkit.decoding.stepper import Stepper
from tests.model.model_helpers import batch, tiny

# position schemes and attention kinds change the joined path (per-row positions, key masks)
MODELS = {
    "default": {},
    "learned": dict(positions="learned"),
    "rope": dict(positions="rope", pre_norm=True),
    "alibi_mqa": dict(positions="alibi", kv_heads=1),
    "relative_gqa": dict(positions="relative", max_relative_position=3, kv_heads=2),
}
SEARCHES = {
    "greedy": SearchConfig(beam=1, max_len_b=9),
    "beam": SearchConfig(beam=3, nbest=2, max_len_b=9),
    "rules": SearchConfig(
        beam=2, nbest=2, max_len_a=0.5, max_len_b=4, min_len=3, no_repeat_ngram=2
    ),
}
SOURCES = [batch([n], 23, seed=s)[0] for n, s in [(7, 1), (3, 2), (9, 3), (5, 4), (4, 5)]]
JOINS = {1: 2, 2: 5, 3: 5, 4: 12}  # input -> the step before which it joins (0 starts)


def alone(model, cfg: SearchConfig) -> list[list[tuple]]:
    return [key(generate([model], src[None], cfg)[0]) for src in SOURCES]


def key(hyps) -> list[tuple]:
    return [(tuple(h.tokens), h.score, h.logprob) for h in hyps]


def same(got: dict[int, list[tuple]], expected: dict[int, list[tuple]]) -> bool:
    """The same inputs with the same tokens exactly, scores to float rounding (rows batched
    with others round differently)."""
    assert got.keys() == expected.keys()
    for i, hyps in expected.items():
        assert [h[0] for h in got[i]] == [h[0] for h in hyps], f"input {i}"
        assert [h[1:] for h in got[i]] == [pytest.approx(h[1:], abs=1e-4) for h in hyps]
    return True


def stepper(model, cfg: SearchConfig, src) -> Stepper:
    ens = Ensemble([model])
    if cfg.width > 1:
        return BeamSearch(ens, src[None], cfg, wide=True)
    return GreedySearch(ens, src[None], cfg)


def joined(model, cfg: SearchConfig, joins: dict[int, int], drop: dict[int, int] | None = None):
    """Input 0 starts; input i joins before step joins[i]; input j is dropped at drop[j]."""
    drop = drop or {}
    out: dict[int, list[tuple]] = {}
    with torch.inference_mode():
        search = stepper(model, cfg, SOURCES[0])
        number = {0: 0}  # stepper input -> source
        step = 0
        while True:
            for i, hyps in search.finished():
                out[number[i]] = key(hyps)
            arriving = [s for s, at in joins.items() if at == step]
            if arriving:
                new = search.join(
                    torch.stack([SOURCES[s] for s in arriving])
                    if len({len(SOURCES[s]) for s in arriving}) == 1
                    else pad(arriving)
                )
                number.update(zip(new, arriving, strict=True))
            gone = {i for i, s in number.items() if drop.get(s) == step}
            if gone:
                search.drop(gone)
            if search.done and step > max(joins.values()):
                return out
            if not search.done:
                search.step()
            step += 1


def pad(inputs: list[int]) -> torch.Tensor:
    width = max(len(SOURCES[s]) for s in inputs)
    out = torch.zeros(len(inputs), width, dtype=torch.long)  # PAD_ID is 0
    for row, s in enumerate(inputs):
        out[row, : len(SOURCES[s])] = SOURCES[s]
    return out


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("variant", MODELS)
def test_joining_inputs_come_out_as_decoded_alone(variant: str, search: str) -> None:
    model, cfg = tiny(**MODELS[variant]), SEARCHES[search]
    expected = alone(model, cfg)
    assert same(joined(model, cfg, JOINS), dict(enumerate(expected)))


def test_inputs_joining_a_drained_search_and_compaction() -> None:
    """Input 4 joins long after input 0 left (the slots before it are dropped): still equal."""
    model, cfg = tiny(), SEARCHES["beam"]
    expected = alone(model, cfg)
    got = joined(model, cfg, {1: 1, 4: 9})
    assert same(got, {0: expected[0], 1: expected[1], 4: expected[4]})


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_dropped_input_is_never_handed_out_and_the_others_are_untouched(search: str) -> None:
    model, cfg = tiny(), SEARCHES[search]
    expected = alone(model, cfg)
    got = joined(model, cfg, JOINS, drop={2: 7, 0: 3})
    assert same(got, {i: expected[i] for i in (1, 3, 4)})


def test_searches_that_cannot_take_joiners_say_so() -> None:
    model = tiny()
    narrow = BeamSearch(Ensemble([model]), SOURCES[0][None], SEARCHES["beam"])
    with pytest.raises(ValueError, match="wide"):
        narrow.join(SOURCES[1][None])


def test_handed_out_hypotheses_are_not_kept() -> None:
    """A server's search may live for hours: what it handed out it forgets."""
    search = stepper(tiny(), SEARCHES["greedy"], SOURCES[1])
    with torch.inference_mode():
        search.join(SOURCES[2][None])
        while not search.done:
            search.step()
    assert {i for i, _ in search.finished()} == {0, 1}
    assert search.found == [[], []]


class NoScan(list):
    """A search's ``found`` that may be indexed but not gone through."""

    def __iter__(self):
        raise AssertionError("a hand-out went through every input the search has taken")


def test_a_hand_out_reads_the_inputs_live_since_the_last_not_all_taken() -> None:
    """A server's search takes up to 10,000 inputs and hands out after every step: each
    hand-out looks at the inputs live since the last one (it went through all of them)."""
    search = stepper(tiny(), SEARCHES["beam"], SOURCES[1])
    handed, step = [], 0
    search.found = NoScan(search.found)
    with torch.inference_mode():
        while not search.done:
            if step in (1, 2, 4):
                search.join(SOURCES[step][None])
            search.step()
            handed += [i for i, _ in search.finished()]
            step += 1
    assert sorted(handed) == [0, 1, 2, 3]


def test_sentences_leaving_keep_their_places_where_they_can() -> None:
    """``filled``, over every set of sentences staying out of 7: the same sentences, each
    below the new count where it was, the others (in order) in the places left free."""
    for mask in range(1, 2**7):
        alive = [i for i in range(7) if mask >> i & 1]
        order, m = filled(alive), len(alive)
        assert sorted(order) == alive
        assert all(order[i] == i for i in alive if i < m)
        assert [i for i in order if i >= m] == [i for i in alive if i >= m]
