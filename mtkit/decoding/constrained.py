"""Lexically constrained beam search with dynamic beam allocation (Post & Vilar, 2018).

Every hypothesis carries its constraint state (:class:`~mtkit.decoding.constraints.Constraints`).
At each step a sentence's candidates are the usual top 2K extensions of its beams, plus, for
every beam, the tokens that advance its constraints and its single best token (so a beam that
falls behind can still catch up). Each candidate's *bank* is the number of constraint tokens it
has met. The beam is divided among the banks: candidates are taken round-robin from the banks,
highest bank first and best score first within a bank (fairseq's interleaving of Hu et al.,
2019), so hypotheses that have met more constraints keep their places even when they score
lower. EOS is allowed only once every constraint is met (:meth:`Constraints.finishes`), and
an EOS candidate among the first K of that order finishes a hypothesis; the first K others go
on. With no constraints this is
plain beam search, candidate for candidate.

The constraint bookkeeping is per sentence and in Python (a few lookups per candidate); the
model, the cache and the candidate scores stay batched tensors, as in
:class:`mtkit.decoding.beam_search.BeamSearch`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from mtkit.config import SearchConfig
from mtkit.decoding.beam import beam_candidates
from mtkit.decoding.constraints import Constraints, State
from mtkit.decoding.ensemble import Ensemble
from mtkit.decoding.hypotheses import (
    Hypothesis,
    Rows,
    finished_hypothesis,
    model_logprob,
)
from mtkit.decoding.stepper import Stepper
from mtkit.errors import MtkitError

# one candidate: (beam within its sentence, token, search score)
Candidate = tuple[int, int, float]


def check_reach(constraints: Sequence[Constraints], limits: Sequence[int]) -> None:
    """Refuse constraints that need more target tokens than a sentence may have."""
    for i, (cons, limit) in enumerate(zip(constraints, limits, strict=True)):
        if cons.pieces > limit:
            raise MtkitError(
                f"sentence {i + 1}: its constraints need {cons.pieces} target "
                f"pieces, more than its length limit of {limit}"
            )


def banked(cands: list[Candidate], banks: list[int]) -> list[int]:
    """Candidate positions in the order that divides the beam among banks: round-robin over
    the banks, highest first, best score first within each bank.

    >>> banked([(0, 5, -1.0), (0, 6, -2.0), (0, 7, -3.0)], [0, 0, 1])
    [2, 0, 1]
    """
    if not cands:
        return []
    by_bank: dict[int, list[int]] = {}
    for i in sorted(range(len(cands)), key=lambda i: (-cands[i][2], cands[i][0], cands[i][1])):
        by_bank.setdefault(banks[i], []).append(i)
    order = sorted(by_bank, reverse=True)
    ranks = max(len(members) for members in by_bank.values())
    return [by_bank[b][r] for r in range(ranks) for b in order if r < len(by_bank[b])]


class ConstrainedSearch(Stepper):
    """Beam search of width ``cfg.width`` in which every hypothesis of input i meets
    ``constraints[i]`` (the module's docstring)."""

    kind = "constrained"

    def __init__(
        self, ens: Ensemble, src: Tensor, cfg: SearchConfig, constraints: Sequence[Constraints]
    ) -> None:
        if len(constraints) != src.shape[0]:
            raise MtkitError(f"{len(constraints)} constraint sets for {src.shape[0]} inputs")
        super().__init__(ens, src, cfg)
        check_reach(constraints, self.limits)
        self.constraints = constraints
        self.sents = list(range(len(self.limits)))
        self.states: list[State] = [c.start for c in constraints]  # per row
        self.ends = _boundary_mask(constraints, ens.tgt_vocab_size, src.device)

    @classmethod
    def check(cls, cfg: SearchConfig) -> None:
        if cfg.sampling:
            raise MtkitError(
                "--sampling cannot honour constraints (--constraints, --glossary); use beam search"
            )

    @property
    def inputs(self) -> list[int]:
        return self.sents

    def step(self) -> None:
        k, step, rows, cfg = self.cfg.width, self.steps, self.rows, self.cfg
        ids = self.ens.special_ids
        sents, states, constraints = self.sents, self.states, self.constraints
        n, w = len(sents), rows.tokens.shape[0] // len(sents)
        search = self.next_lprobs()
        owners = [constraints[sents[r // w]] for r in range(n * w)]
        pairs = zip(owners, states, strict=True)
        unmet = [r for r, (c, s) in enumerate(pairs) if not c.finishes(s)]
        if unmet:
            search[torch.tensor(unmet, device=search.device), ids.eos] = -math.inf
        cands = _candidates(search, rows.scores, owners, states, n, w, k, self.ends)
        chosen: list[list[tuple[int, int]]] = []  # per live sentence: (beam, token), K of them
        alive: list[int] = []
        for i, s in enumerate(sents):
            rank = _ranked(cands[i], constraints[s], states[i * w : i * w + w])
            finished = [(b, t) for b, t, _ in rank[:k] if t == ids.eos]
            found = self.found[s]
            _finish(finished, i * w, rows, search, found, cfg, ids.unk, ids.eos, self.ens.attended)
            going = [(b, t) for b, t, _ in rank if t != ids.eos][:k]
            if going and len(self.found[s]) < k and step < self.limits[s]:
                alive.append(i)
                chosen.append(going + [going[-1]] * (k - len(going)))  # padded: dead copies
        if not alive:
            self.sents = []
            return
        keep = torch.tensor(alive, device=self.device)
        beams = torch.tensor([b for pairs in chosen for b, _ in pairs], device=self.device)
        index = keep.repeat_interleave(k) * w + beams  # (N' * K,) old rows
        tokens = torch.tensor([t for pairs in chosen for _, t in pairs], device=self.device)
        lp = search[index, tokens]
        scores = rows.scores.index_select(0, index) + lp
        if any(len(set(pairs)) < len(pairs) for pairs in chosen):
            scores = scores.masked_fill(_copies(chosen, self.device), -math.inf)
        step_lp = model_logprob(lp, tokens, cfg, ids.unk)
        logprobs = rows.logprobs.index_select(0, index) + step_lp
        self.ens.reorder(index, keep if len(alive) < n or k != w else None)
        self.states = [
            constraints[sents[i]].advance(states[i * w + b], t)
            for i, pairs in zip(alive, chosen, strict=True)
            for b, t in pairs
        ]
        self.sents = [sents[i] for i in alive]
        self.rows = rows.select(index, tokens, scores, logprobs, step_lp)


def _boundary_mask(
    constraints: Sequence[Constraints], vocab: int, device: torch.device
) -> Tensor | None:
    """(V,) True at the pieces before which a word ends (None: phrases are bare token runs)."""
    ends = next((c.boundaries for c in constraints if c.boundaries is not None), None)
    if ends is None:
        return None
    mask = torch.zeros(vocab, dtype=torch.bool, device=device)
    mask[torch.tensor(sorted(ends), dtype=torch.long, device=device)] = True
    return mask


def _candidates(
    search: Tensor,
    scores: Tensor,
    owners: list[Constraints],
    states: list[State],
    n: int,
    w: int,
    k: int,
    ends: Tensor | None,
) -> list[list[Candidate]]:
    """Per sentence: the top 2K extensions of its beams, and for every beam its best token,
    the tokens that advance its constraints and, where a word ending advances them, its best
    boundary piece (``ends``); -inf ones left out, each (beam, token) once."""
    top = beam_candidates(search.view(n, w, -1), scores.view(n, w), 2 * k)
    extra_rows, extra_tokens = [], []
    best = search.argmax(1).tolist()
    waiting = [
        r
        for r, (c, s) in enumerate(zip(owners, states, strict=True))
        if len(c) and c.awaits_boundary(s)
    ]
    if waiting and ends is not None:
        rows_t = torch.tensor(waiting, device=search.device)
        picked = search.index_select(0, rows_t).masked_fill(~ends, -math.inf).argmax(1)
        extra_rows.extend(waiting)
        extra_tokens.extend(picked.tolist())
    for r, (cons, state) in enumerate(zip(owners, states, strict=True)):
        wanted = cons.wanted(state) if len(cons) else []
        extra_rows.extend([r] * (len(wanted) + 1))
        extra_tokens.extend([best[r], *wanted])
    rows_t = torch.tensor(extra_rows, device=search.device)
    tokens_t = torch.tensor(extra_tokens, device=search.device)
    extra_scores = (scores.index_select(0, rows_t) + search[rows_t, tokens_t]).tolist()
    found: list[dict[tuple[int, int], float]] = [{} for _ in range(n)]
    for i, (bs, ts, ss) in enumerate(
        zip(top.beams.tolist(), top.tokens.tolist(), top.scores.tolist(), strict=True)
    ):
        for b, t, s in zip(bs, ts, ss, strict=True):
            found[i].setdefault((b, t), s)
    for r, t, s in zip(extra_rows, extra_tokens, extra_scores, strict=True):
        found[r // w].setdefault((r % w, t), s)
    return [[(b, t, s) for (b, t), s in each.items() if s != -math.inf] for each in found]


def _ranked(cands: list[Candidate], cons: Constraints, states: list[State]) -> list[Candidate]:
    """A sentence's candidates in bank order (:func:`banked`)."""
    if not len(cons):
        return sorted(cands, key=lambda c: (-c[2], c[0], c[1]))
    banks = [cons.progress(cons.advance(states[b], t)) for b, t, _ in cands]
    return [cands[i] for i in banked(cands, banks)]


def _finish(
    finished: list[tuple[int, int]],
    first: int,
    rows: Rows,
    search: Tensor,
    found: list[Hypothesis],
    cfg: SearchConfig,
    unk: int,
    eos: int,
    attended: Callable[[int], Tensor | None],
) -> None:
    """Record the EOS candidates ``finished`` (beam, EOS) of the sentence whose rows start at
    ``first``, at most K per sentence (``attended``: a row's recorded cross-attention)."""
    for beam, _ in finished:
        if len(found) >= cfg.width:
            return
        row = first + beam
        lp = search[row, eos]
        step = model_logprob(lp, torch.tensor(eos), cfg, unk)
        steps = [*rows.steps[row].tolist(), float(step)]
        found.append(
            finished_hypothesis(
                rows.tokens[row, 1:],
                float(rows.scores[row] + lp),
                float(rows.logprobs[row] + step),
                cfg,
                steps,
                attended(row),
            )
        )


def _copies(chosen: list[list[tuple[int, int]]], device: torch.device) -> Tensor:
    """(N' * K,) True for the padding copies among the chosen candidates."""
    mask = []
    for pairs in chosen:
        seen: set[tuple[int, int]] = set()
        for pair in pairs:
            mask.append(pair in seen)
            seen.add(pair)
    return torch.tensor(mask, device=device)
