"""A search as a stepper: start rows for a batch, advance them one decoder step at a time,
hand out each input's hypotheses as soon as its last row has left.

Every search (:mod:`mtkit.decoding.search`'s table) is a :class:`Stepper`: its constructor
encodes the batch and starts the rows, :meth:`Stepper.step` advances them one step (a step of
speculative decoding advances several positions), :meth:`Stepper.finished` hands out the inputs
that are done. :func:`run` drives one to the end; a scheduler may instead interleave steps of
several steppers and answer each input the moment it is handed out.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from typing import ClassVar

from torch import Tensor

from mtkit.config import SearchConfig
from mtkit.data.tokenizer import SpecialIds
from mtkit.decoding.ensemble import Ensemble
from mtkit.decoding.guard import PIECE_FLOOR, PIECE_SLACK, piece_limit
from mtkit.decoding.hypotheses import (
    Hypothesis,
    Rows,
    best_first,
    finished_hypothesis,
    search_lprobs,
    start_rows,
)

LOOP_RUN = PIECE_FLOOR + PIECE_SLACK + 1  # the shortest run of one piece the guard calls a loop


class Stepper(ABC):
    """A search over the inputs src (B, S), one step at a time; subclasses say how a step goes.

    ``found[i]`` gathers input i's finished hypotheses; :attr:`inputs` names the input of each
    live unit (a row, or a sentence's beams), so an input is done once it is not among them.
    """

    kind: ClassVar[str]
    joinable: ClassVar[bool] = False  # new inputs may join it between steps (:meth:`join`)

    def __init__(
        self, ens: Ensemble, src: Tensor, cfg: SearchConfig, copies: int = 1, shared: bool = False
    ) -> None:
        self.ens, self.cfg, self.device = ens, cfg, src.device
        self.copies, self.shared = copies, shared
        self.rows: Rows
        self.rows, self.limits = start_rows(ens, src, copies, cfg, shared)
        self.found: list[list[Hypothesis]] = [[] for _ in self.limits]
        self.steps = 0  # decoder steps taken (positions, for speculative decoding)
        self._handed: set[int] = set()
        self._watched = set(range(len(self.limits)))  # a hand-out's: live at the last or since
        # stop_loops: per input, the longest run of one piece its translation may hold
        self.loop_limits: list[int] | None = None

    def stop_loops(self, src: Tensor) -> None:
        """From now on an input each of whose rows, live and finished, holds a loop (one piece
        more times in a row than the decoding guard allows for its source,
        :func:`~mtkit.decoding.guard.piece_limit`) stops there: every translation of it would
        hold that loop too. Its live rows are handed out as they are, beside its finished
        ones, each with its :attr:`Hypothesis.looped`. A search whose caller retries
        degenerate translations (:mod:`mtkit.engines.guard`) spends no more steps on them.
        ``src``: this search's inputs (B, S)."""
        self.loop_limits = _loop_limits(src, self.ens.special_ids)

    @classmethod
    def check(cls, cfg: SearchConfig) -> None:
        """Refuse search options this search cannot honour (one-line MtkitError); the options'
        own ranges and SearchConfig's combinations are checked when it is built."""
        return None  # greedy decoding, sampling and beam search honour every option

    @property
    @abstractmethod
    def inputs(self) -> list[int]:
        """The input of each live unit, in order (empty once every input is done)."""

    @property
    def done(self) -> bool:
        return not self.inputs

    @abstractmethod
    def step(self) -> None:
        """Advance every live row by one step; finished rows leave."""

    def next_lprobs(self) -> Tensor:
        """This step's search distribution over the live rows (R, V): the models'
        log-probabilities after each row's last token, the search rules applied (the length
        limit forced from the live inputs' shortest); counts the step."""
        step, self.steps = self.rows.age(self.steps), self.steps + 1
        force_from = min(self.limits[i] for i in self.inputs)
        lprobs = self.ens.step(self.rows.tokens[:, -1])
        return search_lprobs(lprobs, self.rows, step, force_from, self.cfg, self.ens.special_ids)

    def join(self, src: Tensor) -> list[int]:
        """Start the inputs src (B', S') beside the live ones (a search whose ``joinable``):
        from the next step on they are decoded with them, each exactly as if alone (each row
        counts its own steps and positions); returns their input numbers."""
        if not self.joinable:
            raise ValueError(f"a {self.kind} search takes no inputs joining it")
        self._compact()
        cfg, first = self.cfg, len(self.limits)
        rows, limits = start_rows(self.ens, src, self.copies, cfg, self.shared, join=True)
        self.rows = self.rows.joined(rows, self.steps, self.ens.special_ids.pad)
        self.limits += limits
        if self.loop_limits is not None:
            self.loop_limits += _loop_limits(src, self.ens.special_ids)
        self.found += [[] for _ in limits]
        new = list(range(first, len(self.limits)))
        self.joined(new)
        self._watched.update(new)
        return new

    def joined(self, inputs: list[int]) -> None:
        """Bookkeeping for new ``inputs`` whose rows were just added after the live ones."""
        raise NotImplementedError(f"a {self.kind} search takes no inputs joining it")

    def drop(self, inputs: set[int]) -> None:
        """Stop decoding ``inputs`` (their requests went away): their rows leave at once and
        they are never handed out."""
        self._handed.update(inputs)
        units = self.inputs
        keep = [u for u, i in enumerate(units) if i not in inputs]
        if len(keep) < len(units):
            self.left(keep)

    def left(self, keep: list[int]) -> None:
        """Keep only the live units ``keep`` (indices into :attr:`inputs`), rows and state."""
        raise NotImplementedError(f"a {self.kind} search cannot drop inputs")

    def _stop_loops(self) -> None:
        """Hand out the inputs caught in a loop (:meth:`stop_loops`); after a step."""
        tokens, units = self.rows.tokens, self.inputs
        if self.loop_limits is None or not units or tokens.shape[1] <= LOOP_RUN:
            return
        if len(set(units)) < len(units):  # several rows an input, as units (sampled copies)
            return
        ids = self.ens.special_ids
        w = tokens.shape[0] // len(units)
        windows = tokens.unfold(1, LOOP_RUN, 1)  # (R, t + 1 - LOOP_RUN, LOOP_RUN)
        first = windows[..., 0]
        runs = windows.eq(first[..., None]).all(-1) & first.ne(ids.pad) & first.ne(ids.bos)
        stuck = runs.any(1).view(len(units), w).all(1)  # every row holds a run of LOOP_RUN
        if not bool(stuck.any()):
            return
        stopped = set()
        for u in stuck.nonzero()[:, 0].tolist():
            i, rows = units[u], range(u * w, u * w + w)
            live = [longest_run(self.rows.generated(r).tolist()) for r in rows]
            done = [longest_run(h.tokens) for h in self.found[i]]
            if min(run for _, run in live + done) <= self.loop_limits[i]:
                continue
            for hyp, run in zip(self.found[i], done, strict=True):
                hyp.looped = run
            self.found[i] += [self._looped(r, run) for r, run in zip(rows, live, strict=True)]
            stopped.add(u)
        if stopped:
            self.left([u for u in range(len(units)) if u not in stopped])

    def _looped(self, row: int, run: tuple[int, int]) -> Hypothesis:
        """Row ``row`` as a hypothesis, stopped in a loop (``run``: its piece, how long); no
        EOS ended it, so its EOS term is 0 (its terms still sum to its log-probability)."""
        rows = self.rows
        hyp = finished_hypothesis(
            rows.generated(row),
            float(rows.scores[row]),
            float(rows.logprobs[row]),
            self.cfg,
            [*rows.terms(row), 0.0],
            self.ens.attended(row),
        )
        hyp.looped = run
        return hyp

    def _compact(self) -> None:
        """Forget the columns and slots before every live row's start (rows joined since)."""
        if self.rows.born is None or self.done:
            return
        dropped = self.ens.compact()
        self.rows = self.rows.compacted(dropped)
        self.steps -= dropped

    def finished(self) -> list[tuple[int, list[Hypothesis]]]:
        """The inputs done since the last call, each with its ``cfg.nbest`` best hypotheses."""
        live = set(self.inputs)
        done = sorted(i for i in self._watched if i not in live and i not in self._handed)
        self._watched = live
        out = [(i, best_first(self.found[i], self.cfg.nbest)) for i in done]
        for i, _ in out:
            self._handed.add(i)
            self.found[i] = []  # handed out: a long-lived search keeps no hypotheses
        return out


def _loop_limits(src: Tensor, ids: SpecialIds) -> list[int]:
    """Each source row's :func:`~mtkit.decoding.guard.piece_limit` (its pieces: not PAD, EOS)."""
    skip = {ids.pad, ids.eos}
    return [piece_limit([t for t in row if t not in skip]) for row in src.tolist()]


def longest_run(tokens: list[int]) -> tuple[int, int]:
    """The longest run of one token in ``tokens``: (the token, how many in a row); the first
    of equal ones; (-1, 0) for none.

    >>> longest_run([5, 7, 7, 7, 5, 5, 5])
    (7, 3)
    """
    best = (-1, 0)
    for token, group in itertools.groupby(tokens):
        run = len(list(group))
        if run > best[1]:
            best = (token, run)
    return best


def run(stepper: Stepper) -> list[list[Hypothesis]]:
    """Step ``stepper`` until every input is done; each input's n-best, best first."""
    out: list[list[Hypothesis]] = [[] for _ in stepper.found]
    while True:
        for i, hyps in stepper.finished():
            out[i] = hyps
        if stepper.done:
            return out
        stepper.step()
