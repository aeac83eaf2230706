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

    def __init__(self, ens: Ensemble, src: Tensor, cfg: SearchConfig, copies: int = 1) -> None:
        self.ens, self.cfg, self.device = ens, cfg, src.device
        self.rows: Rows
        self.rows, self.limits = start_rows(ens, src, copies, cfg)
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
        step, self.steps = self.steps, self.steps + 1
        force_from = min(self.limits[i] for i in self.inputs)
        lprobs = self.ens.step(self.rows.tokens[:, -1])
        return search_lprobs(lprobs, self.rows, step, force_from, self.cfg, self.ens.special_ids)

    def finished(self) -> list[tuple[int, list[Hypothesis]]]:
        """The inputs done since the last call, each with its ``cfg.nbest`` best hypotheses."""
        live = set(self.inputs)
        out = [
            (i, best_first(hyps, self.cfg.nbest))
            for i, hyps in enumerate(self.found)
            if i not in live and i not in self._handed
        ]
        self._handed.update(i for i, _ in out)
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
