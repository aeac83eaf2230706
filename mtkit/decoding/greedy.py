"""Greedy decoding (beam 1) and sampling: each row picks one token per step.

Rows that emit EOS (or reach their length limit) leave the batch at once. Sampling draws
``cfg.nbest`` independent samples per input: that many copies of each row, adjacent, each with
its own copy of the source state since copies leave independently.
"""

from __future__ import annotations

import torch
from torch import Tensor

from mtkit.config import SearchConfig
from mtkit.decoding.ensemble import Ensemble
from mtkit.decoding.hypotheses import finished_hypothesis, model_logprob
from mtkit.decoding.sampling import greedy_tokens, sample_tokens
from mtkit.decoding.stepper import Stepper


class GreedySearch(Stepper):
    """Greedy decoding: every row takes its most likely token."""

    kind = "greedy"
    joinable = True

    def __init__(self, ens: Ensemble, src: Tensor, cfg: SearchConfig, copies: int = 1) -> None:
        super().__init__(ens, src, cfg, copies)
        self.origin = [i // copies for i in range(len(self.rows.scores))]  # input of each row

    @property
    def inputs(self) -> list[int]:
        return self.origin

    def joined(self, inputs: list[int]) -> None:
        self.origin += [i for i in inputs for _ in range(self.copies)]

    def left(self, keep: list[int]) -> None:
        self.origin = [self.origin[r] for r in keep]
        if self.origin:
            index = torch.tensor(keep, device=self.device)
            self.ens.reorder(index, index)  # each row its own source row
            self.rows = self.rows.kept(index)

    def pick(self, search: Tensor) -> Tensor:
        """Each row's token (R,) from its search log-probabilities (R, V)."""
        return greedy_tokens(search)

    def step(self) -> None:
        rows, cfg, ids = self.rows, self.cfg, self.ens.special_ids
        step = rows.age(self.steps)
        search = self.next_lprobs()
        picked = self.pick(search)
        chosen = search.gather(1, picked[:, None])[:, 0]  # (R,)
        scores = rows.scores + chosen
        model_step = model_logprob(chosen, picked, cfg, ids.unk)
        logprobs = rows.logprobs + model_step
        ended = picked.eq(ids.eos) | rows.max_lens.le(step)  # (R,)
        if not bool(ended.any()):  # the one host sync of most steps
            self.rows = rows.extended(picked, scores, logprobs, model_step)
            self._stop_loops()
            return
        for r in ended.nonzero()[:, 0].tolist():
            steps = [*rows.terms(r), float(model_step[r])]
            hyp = finished_hypothesis(
                rows.generated(r),
                float(scores[r]),
                float(logprobs[r]),
                cfg,
                steps,
                self.ens.attended(r),
            )
            self.found[self.origin[r]].append(hyp)
        keep = (~ended).nonzero()[:, 0]
        self.origin = [self.origin[r] for r in keep.tolist()]
        if not self.origin:
            return
        self.ens.reorder(keep, keep)
        self.rows = rows.select(keep, picked[keep], scores[keep], logprobs[keep], model_step[keep])
        self._stop_loops()


class SamplingSearch(GreedySearch):
    """``cfg.nbest`` samples per input, each row drawing its token from its distribution
    (:func:`mtkit.decoding.sampling.sample_tokens`: temperature, top-k, top-p)."""

    kind = "sampling"
    joinable = False  # the draws depend on which rows are decoded together

    def __init__(
        self, ens: Ensemble, src: Tensor, cfg: SearchConfig, generator: torch.Generator
    ) -> None:
        super().__init__(ens, src, cfg, copies=cfg.nbest)
        self.generator = generator

    def pick(self, search: Tensor) -> Tensor:
        cfg = self.cfg
        return sample_tokens(search, self.generator, cfg.temperature, cfg.top_k, cfg.top_p)
