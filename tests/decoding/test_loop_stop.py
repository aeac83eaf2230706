"""Searches that stop an input caught in a loop (``stop_loops``): every row of it, live and
finished, holds one piece more times in a row than the decoding guard allows for its source;
it is handed out there, each hypothesis with its loop, and nothing else changes."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from mtkit.config import SearchConfig
from mtkit.data.tokenizer import EOS_ID, PAD_ID
from mtkit.decoding import generate
from mtkit.decoding.beam_search import BeamSearch
from mtkit.decoding.ensemble import Ensemble
from mtkit.decoding.guard import piece_limit
from mtkit.decoding.stepper import longest_run, run

pytestmark = pytest.mark.usefixtures("one_thread")

LOOP, OTHER, CLEAN = 4, 5, 6  # tokens; a source starting with CLEAN is translated cleanly


class Looper(nn.Module):
    """A decoder that says ``OTHER`` once, then ``LOOP`` for ever (EOS never wins), except for
    a source whose first token is ``CLEAN``: ``OTHER``, then EOS. ``calls`` counts steps."""

    def __init__(self, vocab: int = 40) -> None:
        super().__init__()
        self.tgt_vocab_size, self.max_positions, self.tag_ids = vocab, 256, ()
        self.unused = nn.Parameter(torch.zeros(1))
        self.calls = 0

    def encode(self, src: Tensor) -> Tensor:
        return src

    def start_state(self, enc: Tensor, max_len: int) -> State:
        return State(enc[:, 0].eq(CLEAN), torch.zeros(enc.shape[0], dtype=torch.long))

    def decode_step(self, tokens: Tensor, state: State) -> Tensor:
        self.calls += 1
        probs = torch.full((len(tokens), self.tgt_vocab_size), 0.01)
        first = state.fed.eq(0)
        probs[:, OTHER] += first * 0.9
        probs[:, LOOP] += (~first & ~state.clean) * 0.8 + (~first & state.clean) * 0.01
        probs[:, EOS_ID] = (~first & state.clean) * 0.9 + 1e-4
        state.fed = state.fed + 1
        return probs.log()


class State:
    def __init__(self, clean: Tensor, fed: Tensor) -> None:
        self.clean, self.fed = clean, fed

    def reorder(self, rows: Tensor, sources: Tensor | None = None) -> None:
        self.clean, self.fed = self.clean.index_select(0, rows), self.fed.index_select(0, rows)

    def attended(self, row: int) -> None:
        return None

    def join(self, other: State) -> None:
        self.clean = torch.cat([self.clean, other.clean])
        self.fed = torch.cat([self.fed, other.fed])

    def compact(self) -> int:
        return 0


def batch(*rows: list[int]) -> Tensor:
    width = max(map(len, rows)) + 1
    return torch.tensor([[*row, EOS_ID] + [PAD_ID] * (width - len(row) - 1) for row in rows])


@pytest.mark.parametrize("beam", [1, 4])
def test_a_loop_stops_once_every_row_holds_it(beam: int) -> None:
    src = batch([7, 7, 7], [CLEAN, 7], [7] * 6)  # the third's own run of 6: limit 9
    search = SearchConfig(beam=beam, nbest=beam, max_len_a=0, max_len_b=60)
    model = Looper()
    full = generate([model], src, search)
    steps = model.calls
    model.calls = 0
    found = generate([model], src, search, stop_loops=True)
    assert model.calls < steps / 3
    assert found[1] == full[1] and all(h.looped is None for h in found[1])  # clean: untouched
    for i, limit in ((0, 6), (2, 9)):
        assert limit == piece_limit(src[i][src[i].gt(EOS_ID)].tolist())
        assert len(found[i]) == beam
        for hyp in found[i]:
            assert hyp.looped == longest_run(hyp.tokens) and hyp.looped[1] > limit
            assert hyp.looped[0] == LOOP
            assert len(hyp.token_logprobs) == len(hyp.tokens) + 1
            assert sum(hyp.token_logprobs) == pytest.approx(hyp.logprob)
        assert min(h.looped[1] for h in found[i]) <= limit + beam  # at once, give or take
        # what it was stopped at begins what it would have been
        best = full[i][0].tokens
        assert found[i][0].tokens == best[: len(found[i][0].tokens)]


def test_without_stop_loops_nothing_is_stopped() -> None:
    found = generate([Looper()], batch([7, 7]), SearchConfig(beam=3, max_len_a=0, max_len_b=30))
    assert found[0][0].looped is None and len(found[0][0].tokens) == 30


def test_an_input_with_a_clean_finished_hypothesis_goes_on() -> None:
    class Early(Looper):
        """EOS possible (second best) right after OTHER: a clean finished hypothesis."""

        def decode_step(self, tokens: Tensor, state: State) -> Tensor:
            probs = super().decode_step(tokens, state).exp()
            probs[:, EOS_ID] += state.fed.eq(2) * 0.5
            return probs.log()

    search = SearchConfig(beam=3, max_len_a=0, max_len_b=30)
    src = batch([7, 7])
    model = Early()
    found = generate([model], src, search, stop_loops=True)
    assert found == generate([model], src, search)
    assert all(h.looped is None for h in found[0])


def test_inputs_joining_a_search_stop_as_they_would_alone() -> None:
    search = SearchConfig(beam=3, nbest=3, max_len_a=0, max_len_b=40)
    first, later = batch([7, 7], [CLEAN, 7]), batch([7] * 6, [8, 9, 9])
    model = Looper()
    alone = [generate([model], src[None], search, stop_loops=True)[0] for src in [*first, *later]]
    with torch.inference_mode():
        stepper = BeamSearch(Ensemble([model]), first, search, wide=True)
        stepper.stop_loops(first)
        out = {}
        for _ in range(3):
            stepper.step()
            out.update(stepper.finished())
        assert stepper.join(later) == [2, 3]
        out.update((i, hyps) for i, hyps in enumerate(run(stepper)) if i not in out)
    got = [out[i] for i in range(4)]
    assert [[(h.tokens, h.looped) for h in hyps] for hyps in got] == [
        [(h.tokens, h.looped) for h in hyps] for hyps in alone
    ]
    assert [hyps[0].looped is not None for hyps in got] == [True, False, True, True]
