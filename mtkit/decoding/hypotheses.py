"""What every search keeps per row, and how a finished row becomes a :class:`Hypothesis`.

:class:`Rows` holds the rows being decoded (their tokens so far, cumulative search score and
model log-probability, length limit and per-token terms); :func:`start_rows` encodes a batch and
starts them; :func:`search_lprobs` applies the search rules to one step's log-probabilities;
:func:`finished_hypothesis` and :func:`best_first` turn finished rows into each input's n-best.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from mtkit.config import SearchConfig
from mtkit.data.tokenizer import DEFAULT_SPECIAL_IDS, SpecialIds
from mtkit.decoding.beam import constrain, length_penalty, max_target_lengths
from mtkit.decoding.ensemble import Ensemble
from mtkit.errors import MtkitError


@dataclass
class Hypothesis:
    """One translation: ``tokens`` without BOS/EOS; ``score`` ranks (length-penalised search
    score, penalties included); ``logprob`` is the models' summed log-probability incl. EOS,
    ``token_logprobs`` its terms, one per token and the last for EOS (they sum to ``logprob``)."""

    tokens: list[int]
    score: float
    logprob: float
    token_logprobs: list[float] = field(default_factory=list)
    # the first model's recorded cross-attention (len(tokens) + 1 steps, S), when its state
    # records one (Transformer.start_state's alignment_layer: word alignments)
    attention: Tensor | None = field(default=None, compare=False)
    # the search stopped its input in a loop (Stepper.stop_loops): its longest run of one
    # token (the token, how many in a row); None where the search went on to its end
    looped: tuple[int, int] | None = None


@dataclass
class Rows:
    """The rows being decoded (R of them) and their running sums.

    Rows that joined a running decode (:meth:`joined`) are left-padded: ``born`` says at which
    step each row started (its BOS column); a batch started together has ``born`` None.
    """

    tokens: Tensor  # (R, t + 1) BOS + tokens so far (PAD before a joined row's BOS)
    scores: Tensor  # (R,) cumulative search score (penalties included)
    logprobs: Tensor  # (R,) cumulative model log-probability
    max_lens: Tensor  # (R,) tokens allowed before EOS
    steps: Tensor  # (R, t) the model log-probability of each token so far (0 before BOS)
    born: Tensor | None = None  # (R,) long: the step at which each row started

    def select(
        self, index: Tensor, tokens: Tensor, scores: Tensor, logprobs: Tensor, step: Tensor
    ) -> Rows:
        """Rows ``index`` of these, extended by one token each (``step``: its model
        log-probability)."""
        history = torch.cat([self.tokens.index_select(0, index), tokens[:, None]], dim=1)
        steps = torch.cat([self.steps.index_select(0, index), step[:, None]], dim=1)
        born = None if self.born is None else self.born.index_select(0, index)
        return Rows(history, scores, logprobs, self.max_lens.index_select(0, index), steps, born)

    def extended(self, tokens: Tensor, scores: Tensor, logprobs: Tensor, step: Tensor) -> Rows:
        """Every row extended by one token (no row leaves)."""
        history = torch.cat([self.tokens, tokens[:, None]], 1)
        steps = torch.cat([self.steps, step[:, None]], 1)
        return Rows(history, scores, logprobs, self.max_lens, steps, self.born)

    def kept(self, index: Tensor) -> Rows:
        """Rows ``index`` of these as they are."""
        fields = (self.tokens, self.scores, self.logprobs, self.max_lens, self.steps)
        born = None if self.born is None else self.born.index_select(0, index)
        return Rows(*(x.index_select(0, index) for x in fields), born)

    def age(self, step: int) -> int | Tensor:
        """Each row's own step (R,) at the decode's ``step``; ``step`` itself where all rows
        started together."""
        return step if self.born is None else step - self.born

    def generated(self, row: int) -> Tensor:
        """Row ``row``'s tokens after its BOS."""
        return self.tokens[row, 1 + self._born(row) :]

    def terms(self, row: int) -> list[float]:
        """Row ``row``'s per-token model log-probabilities so far."""
        return self.steps[row, self._born(row) :].tolist()

    def _born(self, row: int) -> int:
        return 0 if self.born is None else int(self.born[row])

    def joined(self, new: Rows, step: int, pad: int) -> Rows:
        """These rows and, after them, ``new`` ones (just started: BOS only) starting at the
        decode's ``step``, left-padded with ``pad`` to these rows' width."""
        pad = self.tokens.new_full((len(new.scores), step), pad)
        tokens = torch.cat([self.tokens, torch.cat([pad, new.tokens], 1)])
        steps = torch.cat([self.steps, new.steps.new_zeros((len(new.scores), step))])
        born = self.born if self.born is not None else self.max_lens.new_zeros(len(self.scores))
        born = torch.cat([born, torch.full_like(new.max_lens, step)])
        sums = (torch.cat([a, b]) for a, b in zip(self._sums(), new._sums(), strict=True))
        return Rows(tokens, *sums, steps, born)

    def _sums(self) -> tuple[Tensor, Tensor, Tensor]:
        return self.scores, self.logprobs, self.max_lens

    def compacted(self, steps: int) -> Rows:
        """The rows without their first ``steps`` columns (before every row's BOS)."""
        if self.born is None:
            return self
        born = self.born - steps
        tokens, terms = self.tokens[:, steps:], self.steps[:, steps:]
        return Rows(tokens, *self._sums(), terms, born if bool(born.any()) else None)


def start_rows(
    ens: Ensemble,
    src: Tensor,
    copies: int,
    cfg: SearchConfig,
    shared: bool = False,
    join: bool = False,
) -> tuple[Rows, list]:
    """Encode, start the caches for ``copies`` rows per input; the rows and each input's limit.
    ``shared``: an input's copies share one source row and only the first is live (the others
    score -inf: a beam search's beams before its first step, as wide as later ones); ``join``:
    the rows join the ensemble's running decode instead of starting one."""
    if cfg.min_len > ens.max_positions - 1:
        raise MtkitError(f"--min-len {cfg.min_len} exceeds the model's max_positions")
    ids = ens.special_ids
    cap = ens.max_positions - 1
    limits = max_target_lengths(
        src, cfg.max_len_a, cfg.max_len_b, cfg.min_len, cap, ids.pad, ens.tag_ids
    )  # (B,)
    (ens.join if join else ens.start)(src, copies, int(limits.max()) + 1, shared)
    r = src.shape[0] * copies
    scores = torch.zeros(r, device=src.device)
    if shared and copies > 1:
        scores.view(-1, copies)[:, 1:] = -math.inf
    tokens = torch.full((r, 1), ids.bos, dtype=torch.long, device=src.device)
    steps = torch.zeros(r, 0, device=src.device)
    zeros = torch.zeros(r, device=src.device)
    rows = Rows(tokens, scores, zeros, limits.repeat_interleave(copies), steps)
    return rows, limits.tolist()


def search_lprobs(
    lprobs: Tensor,
    rows: Rows,
    step: int | Tensor,
    force_from: int,
    cfg: SearchConfig,
    ids: SpecialIds = DEFAULT_SPECIAL_IDS,
) -> Tensor:
    """The search distribution: this step's log-probabilities (R, V), constrained in place
    (:func:`mtkit.decoding.beam.constrain`)."""
    history = rows.tokens[:, 1:]
    return constrain(
        lprobs,
        step,
        history,
        rows.max_lens,
        force_from,
        cfg.min_len,
        cfg.unk_penalty,
        cfg.no_repeat_ngram,
        ids,
    )


def model_logprob(search_lprob: Tensor, tokens: Tensor, cfg: SearchConfig, unk: int) -> Tensor:
    """The models' log-probability of chosen tokens from their search log-probability.

    Of the rules in :func:`~mtkit.decoding.beam.constrain`, only the UNK penalty shifts a
    finite value; the others ban tokens (-inf), which are chosen only when nothing else is left.
    """
    if not cfg.unk_penalty:
        return search_lprob
    return search_lprob + cfg.unk_penalty * tokens.eq(unk)


def finished_hypothesis(
    tokens: Tensor,
    score: float,
    logprob: float,
    cfg: SearchConfig,
    steps: list[float],
    attention: Tensor | None = None,
) -> Hypothesis:
    """A finished hypothesis from its tokens (without BOS/EOS), raw sums and per-token terms
    (``steps``, EOS's last), and its recorded cross-attention (or None)."""
    lp = length_penalty(float(len(tokens) + 1), cfg.lenpen, cfg.lenpen_style)
    return Hypothesis(tokens.tolist(), score / lp, logprob, steps, attention)


def best_first(found: list[Hypothesis], n: int) -> list[Hypothesis]:
    """An input's ``n`` best hypotheses, best first; a stand-in of score -inf where it has
    none (a degenerate model for which EOS is impossible; a real one always finishes)."""
    return sorted(found, key=lambda h: -h.score)[:n] or [Hypothesis([], -math.inf, -math.inf)]
