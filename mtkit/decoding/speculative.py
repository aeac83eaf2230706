"""Speculative greedy decoding: a small draft model proposes tokens, the models check them.

Greedy decoding runs the models (the teacher: one model or an ensemble) once per token. Here a
cheap draft model, with the same vocabularies, proposes ``k`` tokens greedily with its own
cache; the teacher then reads its pending token and the ``k`` proposals in one pass
(``decode_steps``), which gives its distribution after each of them (Leviathan et al., 2023,
"Fast Inference from Transformers via Speculative Decoding"; Chen et al., 2023; the greedy case
is Stern et al., 2018, "Blockwise Parallel Decoding"). With the search rules applied at each
position as greedy decoding applies them (:func:`mtkit.decoding.beam.constrain`: min_len,
the length limit, unk_penalty, no_repeat_ngram), the teacher's choice g_i after position i is
greedy's whenever the proposals before it were greedy's, so the longest run of proposals with
d_{i+1} = g_i is accepted and g_a after it comes free: each pass yields 1 to k + 1 tokens,
exactly the tokens, scores and log-probabilities of greedy decoding. (Exactly up to float
rounding: a pass over k + 1 positions sums in another order than k + 1 single steps, so a
near-tie between two tokens, a difference in the last bits, could go the other way.)

Worked example, k = 3, teacher pending token y: the draft proposes d = (a, b, c); the teacher
reads (y, a, b, c) and picks g = (a, b, x, ·): a and b are accepted, x replaces c, and the
row gains a, b, x (the teacher's choice after c is not used). Both caches are then rolled
back (``truncate``) to the positions that hold y, a, b; x is the next pending token.

A batch moves in lockstep, so that every row's cache has one length: each pass, every row
that goes on gains m + 1 tokens, m the fewest proposals any of them had accepted (rows with
more accepted get them again from the draft next time: still greedy's tokens, only later). A
row that ends (EOS, or its length limit) among its own accepted tokens leaves the batch at
once. So a batch runs at the pace of its least predictable sentence, and one sentence at a
time gains the most.

The draft proposes its own argmax (of the search rules only the bans of PAD, BOS and an early
EOS, which cost nothing: it only guesses, and the teacher applies every rule); it must share the
teacher's special ids and target vocabulary and have at least its ``max_positions``. It may
guess among some pieces only (a model with ``columns``, as
:class:`~mtkit.model.shortlisted.ShortlistedDraft`), and may be int8 where the teacher is not:
a draft that guesses worse costs passes, never a different output. With a ``confidence``
threshold (as transformers' ``assistant_confidence_threshold``) a pass proposes fewer than k
tokens where the draft is unsure: it stops after a proposal whose probability, by the draft,
is below the threshold, so fewer draft steps go to guesses the models would reject.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from mtkit.config import SearchConfig
from mtkit.decoding.beam import constrain
from mtkit.decoding.ensemble import Ensemble, special_ids_of
from mtkit.decoding.hypotheses import Rows, finished_hypothesis, model_logprob
from mtkit.decoding.sampling import greedy_tokens
from mtkit.decoding.stepper import Stepper
from mtkit.errors import MtkitError


@dataclass
class DraftStats:
    """What the drafts achieved, summed over calls: per row and pass, ``proposed`` tokens and
    ``accepted`` ones (the row's own longest agreeing run); ``passes`` of the teacher,
    ``row_passes`` the rows they decoded, and ``tokens`` produced (EOS included)."""

    proposed: int = 0
    accepted: int = 0
    passes: int = 0
    row_passes: int = 0
    tokens: int = 0

    def count(self, n: int, agreed: list[int], useful: list[int]) -> None:
        """One pass of n proposals per row, ``agreed`` of them accepted, of which ``useful``
        came before the row's end (the tokens after EOS are not counted)."""
        self.passes += 1
        self.row_passes += len(agreed)
        self.proposed += sum(min(n, u) for u in useful)
        self.accepted += sum(min(a, u) for a, u in zip(agreed, useful, strict=True))

    @property
    def acceptance(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def tokens_per_pass(self) -> float:
        """Tokens a row gained per pass of the teacher (greedy decoding: 1)."""
        return self.tokens / self.row_passes if self.row_passes else 0.0


@dataclass
class Draft:
    """A draft model (a :class:`~mtkit.decoding.protocol.StepDecoder` with ``decode_steps``, in
    eval mode) and the tokens it proposes per pass of the teacher."""

    model: Any  # with ``columns`` (ids, increasing): its logits are over those ids only
    tokens: int = 4  # at most, per pass
    stats: DraftStats | None = None  # counted into, when given
    confidence: float = 0.0  # > 0: a pass's proposals stop after one less probable than this

    def __post_init__(self) -> None:
        if self.tokens < 1:
            raise MtkitError(f"--draft-tokens must be at least 1, got {self.tokens}")
        if not 0.0 <= self.confidence < 1.0:
            raise MtkitError(f"--draft-confidence must be in [0, 1), got {self.confidence}")


class _Drafter:
    """The draft model's state over a batch: positions 0..length-1 of each row are cached."""

    def __init__(self, draft: Draft, ens: Ensemble, src: Tensor, max_len: int) -> None:
        model = draft.model
        if special_ids_of([model]) != ens.special_ids:
            raise MtkitError("the draft model's special ids differ from the models'")
        if model.tgt_vocab_size != ens.tgt_vocab_size:
            raise MtkitError(
                f"the draft model's target vocabulary ({model.tgt_vocab_size}) "
                f"differs from the models' ({ens.tgt_vocab_size})"
            )
        if model.max_positions < ens.max_positions:
            raise MtkitError(
                f"the draft model's max_positions ({model.max_positions}) is below "
                f"the models' ({ens.max_positions})"
            )
        self.model, ids = model, ens.special_ids
        self.state = model.start_state(model.encode(src), max_len)
        # a draft may guess among some pieces only: its logits' columns are these ids
        self.columns: Tensor | None = getattr(model, "columns", None)
        self.banned = self._column([ids.pad, ids.bos], src.device)  # never greedy's
        self.early = self._column([ids.pad, ids.bos, ids.eos], src.device)  # < min_len
        self.length = 0

    def _column(self, ids: list[int], device: torch.device) -> Tensor:
        """The columns of the draft's logits that hold vocabulary ids ``ids`` (among them)."""
        found = torch.tensor(ids, device=device)
        return found if self.columns is None else torch.searchsorted(self.columns, found)

    def propose(self, tokens: Tensor, n: int, min_len: int, confidence: float = 0.0) -> Tensor:
        """Up to n tokens (R, m) after ``tokens`` (R, t + 1), BOS and every token so far;
        first the tokens not yet cached are fed (the pending one, or two after a fully accepted
        pass). Of the search rules only the cheapest are followed: no PAD, no BOS, no EOS before
        ``min_len``. With ``confidence`` > 0 the proposals stop early, after the first one the
        draft gives a probability below it in every row (a guess likely to be rejected: further
        guesses after it are likelier still to be wasted)."""
        history = tokens.shape[1]
        if self.length >= history:  # more was proposed than accepted: forget it
            self.state.truncate(history - 1)
            self.length = history - 1
        logits = self.model.decode_steps(tokens[:, self.length :], self.state)[:, -1]
        proposed: list[Tensor] = []
        for i in range(n):
            if i:
                logits = self.model.decode_steps(proposed[-1][:, None], self.state)[:, 0]
            logits.index_fill_(
                1, self.banned if history - 1 + i >= min_len else self.early, -math.inf
            )
            best = logits.argmax(-1)
            proposed.append(best if self.columns is None else self.columns[best])
            if confidence > 0 and i + 1 < n and not _confident(logits, best, confidence):
                break
        self.length = history - 1 + len(proposed)
        return torch.stack(proposed, 1)

    def reorder(self, rows: Tensor) -> None:
        self.state.reorder(rows, rows)


def _confident(logits: Tensor, best: Tensor, threshold: float) -> bool:
    """Whether any row's best token has a probability of at least ``threshold``."""
    top = logits.gather(1, best[:, None])[:, 0] - torch.logsumexp(logits, -1)
    return bool(top.max() >= math.log(threshold))


def _choices(
    lprobs: Tensor,
    rows: Rows,
    fed: Tensor,
    step: int,
    force_from: int,
    cfg: SearchConfig,
    ens: Ensemble,
) -> tuple[Tensor, Tensor]:
    """Greedy's choice after each position of ``fed`` (R, n + 1) and its search log-probability,
    both (R, n + 1), from the teacher's log-probabilities (R, n + 1, V): the search rules of
    step ``step + i`` at position i, over the history the proposals before it would make."""
    picked, chosen = [], []
    for i in range(fed.shape[1]):
        history = torch.cat([rows.tokens[:, 1:], fed[:, 1 : i + 1]], 1)
        search = constrain(
            lprobs[:, i],
            step + i,
            history,
            rows.max_lens,
            force_from,
            cfg.min_len,
            cfg.unk_penalty,
            cfg.no_repeat_ngram,
            ens.special_ids,
        )
        picked.append(greedy_tokens(search))
        chosen.append(search.gather(1, picked[-1][:, None])[:, 0])
    return torch.stack(picked, 1), torch.stack(chosen, 1)


class SpeculativeSearch(Stepper):
    """Greedy decoding of ``ens`` (beam 1, no sampling), ``draft`` proposing; a step is one pass
    of the models (the module's docstring)."""

    kind = "speculative"

    def __init__(self, ens: Ensemble, src: Tensor, cfg: SearchConfig, draft: Draft) -> None:
        super().__init__(ens, src, cfg)
        self.draft = draft
        self.drafter = _Drafter(draft, ens, src, int(max(self.limits)) + 1)
        self.origin = list(range(len(self.limits)))  # input of each row

    @classmethod
    def check(cls, cfg: SearchConfig) -> None:
        if cfg.width != 1 or cfg.sampling:
            raise MtkitError(
                "--draft speeds up greedy decoding: it needs --beam 1 and no --sampling (got "
                f"--beam {cfg.width}{' --sampling' if cfg.sampling else ''})"
            )
        if cfg.constraints:
            raise MtkitError(
                "--draft cannot be combined with --constraints or --glossary (constrained search)"
            )
        if cfg.alignment:
            raise MtkitError("--draft cannot be combined with --alignment")

    @property
    def inputs(self) -> list[int]:
        return self.origin

    def step(self) -> None:
        rows, cfg, ens, draft, origin = self.rows, self.cfg, self.ens, self.draft, self.origin
        ids, stats, limits = ens.special_ids, draft.stats, self.limits
        step = rows.tokens.shape[1] - 1  # tokens chosen so far; the teacher caches step of them
        n = min(draft.tokens, max(limits[i] for i in origin) - step)
        fed = rows.tokens[:, -1:]
        if n > 0:
            proposed = self.drafter.propose(rows.tokens, n, cfg.min_len, draft.confidence)
            n = proposed.shape[1]
            fed = torch.cat([fed, proposed], 1)  # (R, n + 1)
        force_from = min(limits[i] for i in origin)
        picked, chosen = _choices(ens.steps(fed), rows, fed, step, force_from, cfg, ens)
        agree = picked[:, :n].eq(fed[:, 1:]).long().cumprod(1).sum(1)  # (R,) accepted proposals
        positions = torch.arange(n + 1, device=self.device)
        ends = (picked.eq(ids.eos) | rows.max_lens[:, None].le(step + positions)) & positions.le(
            agree[:, None]
        )  # (R, n + 1) where a row ends, among its greedy tokens
        sums = torch.cat([rows.scores[:, None], chosen], 1).cumsum(1)  # as greedy adds them
        model_steps = model_logprob(chosen, picked, cfg, ids.unk)
        logprobs = torch.cat([rows.logprobs[:, None], model_steps], 1).cumsum(1)
        ended, first_end = ends.any(1).tolist(), ends.long().argmax(1).tolist()
        agreed = agree.tolist()
        if stats is not None:
            useful = [e if end else n for e, end in zip(first_end, ended, strict=True)]
            stats.count(n, agreed, useful)
        for r in (r for r in range(len(ended)) if ended[r]):
            e = first_end[r]
            steps = [*rows.steps[r].tolist(), *model_steps[r, : e + 1].tolist()]
            tokens = torch.cat([rows.tokens[r, 1:], picked[r, :e]])
            hyp = finished_hypothesis(
                tokens, float(sums[r, e + 1]), float(logprobs[r, e + 1]), cfg, steps
            )
            self.found[origin[r]].append(hyp)
            if stats is not None:
                stats.tokens += e + 1
        going = [r for r in range(len(ended)) if not ended[r]]
        self.steps = step + 1
        if not going:
            self.origin = []
            return
        m = min(agreed[r] for r in going)  # every row that goes on gains m + 1 tokens
        if stats is not None:
            stats.tokens += (m + 1) * len(going)
        ens.truncate(step + m + 1)
        self.rows = Rows(
            torch.cat([rows.tokens, picked[:, : m + 1]], 1),
            sums[:, m + 1],
            logprobs[:, m + 1],
            rows.max_lens,
            torch.cat([rows.steps, model_steps[:, : m + 1]], 1),
        )
        self.steps = step + m + 1
        if len(going) < len(ended):
            keep = torch.tensor(going, device=self.device)
            ens.reorder(keep, keep)
            self.drafter.reorder(keep)
            self.rows = self.rows.kept(keep)
            self.origin = [origin[r] for r in going]
