"""Batched beam search with the model's KV cache (fairseq's split, Ott et al., 2019).

:func:`mtkit.decoding.beam.beam_candidates` is the pure per-step top-2K, :class:`BeamSearch`
the bookkeeping. A hypothesis is finished when it emits EOS among the top K candidates; a
sentence is done once it has K finished hypotheses (or its length limit forces EOS), and then
leaves the batch. Hypotheses rank by ``logprob / length_penalty(len)``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from mtkit.config import SearchConfig
from mtkit.decoding.beam import Candidates, beam_candidates, finished_mask, select_active
from mtkit.decoding.ensemble import Ensemble
from mtkit.decoding.hypotheses import (
    Hypothesis,
    Rows,
    finished_hypothesis,
    model_logprob,
)
from mtkit.decoding.stepper import Stepper


class BeamSearch(Stepper):
    """Beam search of width ``cfg.width``.

    ``sents`` maps the N live sentences to inputs; sentence i owns rows i*W..i*W+W-1, where W,
    the live beams per sentence, is 1 at the first step (all beams would be copies of BOS) and K
    afterwards (fewer while the 2K candidates leave fewer than K without EOS, which happens only
    with vocabularies smaller than 2K + 1).
    """

    kind = "beam"
    joinable = True

    def __init__(self, ens: Ensemble, src: Tensor, cfg: SearchConfig, wide: bool = False) -> None:
        super().__init__(ens, src, cfg, *((cfg.width, True) if wide else ()))
        self.sents = list(range(len(self.limits)))

    @property
    def inputs(self) -> list[int]:
        return self.sents

    def join(self, src: Tensor) -> list[int]:
        """:meth:`Stepper.join`, for a search built ``wide``: every sentence has K rows from
        its first step on (all but the first scoring -inf until then, so the same candidates
        come out), so that a new sentence's rows line up with the running ones'."""
        if self.copies != self.cfg.width:
            raise ValueError("a beam search takes sentences joining it only when built wide")
        return super().join(src)

    def joined(self, inputs: list[int]) -> None:
        self.sents += inputs

    def left(self, keep: list[int]) -> None:
        w = self.rows.tokens.shape[0] // len(self.sents)
        self.sents = [self.sents[i] for i in keep]
        if self.sents:
            sents = torch.tensor(keep, device=self.device)
            index = (sents[:, None] * w + torch.arange(w, device=self.device)).view(-1)
            self.ens.reorder(index, sents)
            self.rows = self.rows.kept(index)

    def step(self) -> None:
        k, rows, cfg = self.cfg.width, self.rows, self.cfg
        ids = self.ens.special_ids
        sents, found, limits = self.sents, self.found, self.limits
        n, w = len(sents), rows.tokens.shape[0] // len(sents)
        ages = rows.age(self.steps)  # each sentence's own step: the same for its rows
        step = [ages] * n if isinstance(ages, int) else ages.view(n, w)[:, 0].tolist()
        search = self.next_lprobs()
        cand = beam_candidates(search.view(n, w, -1), rows.scores.view(n, w), 2 * k)  # (N, 2K)
        chosen = search.view(n, -1).gather(1, cand.flat)  # (N, 2K) this step's search lprob
        cand_steps = model_logprob(chosen, cand.tokens, cfg, ids.unk)  # (N, 2K)
        cand_logprobs = rows.logprobs.view(n, w).gather(1, cand.beams) + cand_steps
        live = [found[s] for s in sents]
        finalize(cand, cand_logprobs, cand_steps, rows, live, cfg, ids.eos, self.ens.attended)
        alive = [i for i, s in enumerate(sents) if len(found[s]) < k and step[i] < limits[s]]
        if not alive:
            self.sents = []
            return
        width = min(k, cand.tokens.shape[1] - w)  # K unless the vocabulary is tiny
        pos = select_active(cand.tokens, width, ids.eos)  # (N, K) surviving candidates, best first
        keep = torch.arange(n, device=self.device)
        if len(alive) < n:  # finished sentences leave the batch, the last ones taking their
            alive = filled(alive)  # places: the others' source rows stay where they are
            keep = torch.tensor(alive, device=self.device)
            pos, cand_logprobs = pos.index_select(0, keep), cand_logprobs.index_select(0, keep)
            cand_steps = cand_steps.index_select(0, keep)
            cand = Candidates(*(x.index_select(0, keep) for x in cand))
            self.sents = [sents[i] for i in alive]
        index = (keep[:, None] * w + cand.beams.gather(1, pos)).view(-1)  # (N' * K,) old rows
        # a sentence's beams share one source row; beam moves within a sentence leave it alone
        self.ens.reorder(index, keep if len(alive) < n or width != w else None)
        self.rows = rows.select(
            index,
            cand.tokens.gather(1, pos).view(-1),
            cand.scores.gather(1, pos).view(-1),
            cand_logprobs.gather(1, pos).view(-1),
            cand_steps.gather(1, pos).view(-1),
        )
        self._stop_loops()


def filled(alive: list[int]) -> list[int]:
    """The positions ``alive`` (ascending) in the order that leaves each below ``len(alive)``
    where it is and puts the others, in order, into the places left free below it."""
    m = len(alive)
    movers = iter(i for i in alive if i >= m)
    stay = set(alive)
    return [i if i in stay else next(movers) for i in range(m)]


def finalize(
    cand: Candidates,
    cand_logprobs: Tensor,
    cand_steps: Tensor,
    rows: Rows,
    found: list[list[Hypothesis]],
    cfg: SearchConfig,
    eos: int,
    attended: Callable[[int], Tensor | None],
) -> None:
    """Record EOS candidates among the top K as finished hypotheses of their sentence (N lists),
    at most K per sentence (fairseq's rule: a sentence is done once it has K); ``attended``
    gives a row's recorded cross-attention."""
    k = cfg.width
    mask = finished_mask(cand, k, eos)  # (N, 2K)
    if not bool(mask.any()):  # the one host sync of most steps
        return
    w = rows.tokens.shape[0] // len(found)
    where = mask.nonzero()[:, 0].tolist()
    beams = cand.beams[mask].tolist()
    scores, logprobs = cand.scores[mask].tolist(), cand_logprobs[mask].tolist()
    last = cand_steps[mask].tolist()
    for i, beam, score, logprob, eos_step in zip(where, beams, scores, logprobs, last, strict=True):
        if len(found[i]) < k:
            row = i * w + beam
            steps = [*rows.terms(row), eos_step]
            tokens = rows.generated(row)
            hyp = finished_hypothesis(tokens, score, logprob, cfg, steps, attended(row))
            found[i].append(hyp)
