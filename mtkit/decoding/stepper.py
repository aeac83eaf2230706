"""A search as a stepper: start rows for a batch, advance them one decoder step at a time,
hand out each input's hypotheses as soon as its last row has left.

Every search (:mod:`mtkit.decoding.search`'s table) is a :class:`Stepper`: its constructor
encodes the batch and starts the rows, :meth:`Stepper.step` advances them one step (a step of
speculative decoding advances several positions), :meth:`Stepper.finished` hands out the inputs
that are done. :func:`run` drives one to the end; a scheduler may instead interleave steps of
several steppers and answer each input the moment it is handed out.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from torch import Tensor

from mtkit.config import SearchConfig
from mtkit.decoding.ensemble import Ensemble
from mtkit.decoding.hypotheses import Hypothesis, Rows, best_first, search_lprobs, start_rows


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
        self.found += [[] for _ in limits]
        new = list(range(first, len(self.limits)))
        self.joined(new)
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
        out = [
            (i, best_first(hyps, self.cfg.nbest))
            for i, hyps in enumerate(self.found)
            if i not in live and i not in self._handed
        ]
        for i, _ in out:
            self._handed.add(i)
            self.found[i] = []  # handed out: a long-lived search keeps no hypotheses
        return out


def run(stepper: Stepper) -> list[list[Hypothesis]]:
    """Step ``stepper`` until every input is done; each input's n-best, best first."""
    out: list[list[Hypothesis]] = [[] for _ in stepper.found]
    while True:
        for i, hyps in stepper.finished():
            out[i] = hyps
        if stepper.done:
            return out
        stepper.step()
