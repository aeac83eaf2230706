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


@dataclass
class Rows:
    """The rows being decoded (R of them) and their running sums."""

    tokens: Tensor  # (R, t + 1) BOS + tokens so far
    scores: Tensor  # (R,) cumulative search score (penalties included)
    logprobs: Tensor  # (R,) cumulative model log-probability
    max_lens: Tensor  # (R,) tokens allowed before EOS
    steps: Tensor  # (R, t) the model log-probability of each token so far

    def select(
        self, index: Tensor, tokens: Tensor, scores: Tensor, logprobs: Tensor, step: Tensor
    ) -> Rows:
        """Rows ``index`` of these, extended by one token each (``step``: its model
        log-probability)."""
        history = torch.cat([self.tokens.index_select(0, index), tokens[:, None]], dim=1)
        steps = torch.cat([self.steps.index_select(0, index), step[:, None]], dim=1)
        return Rows(history, scores, logprobs, self.max_lens.index_select(0, index), steps)

    def extended(self, tokens: Tensor, scores: Tensor, logprobs: Tensor, step: Tensor) -> Rows:
        """Every row extended by one token (no row leaves)."""
        history = torch.cat([self.tokens, tokens[:, None]], 1)
        steps = torch.cat([self.steps, step[:, None]], 1)
        return Rows(history, scores, logprobs, self.max_lens, steps)

    def kept(self, index: Tensor) -> Rows:
        """Rows ``index`` of these as they are."""
        fields = (self.tokens, self.scores, self.logprobs, self.max_lens, self.steps)
        return Rows(*(x.index_select(0, index) for x in fields))


def start_rows(ens: Ensemble, src: Tensor, copies: int, cfg: SearchConfig) -> tuple[Rows, list]:
    """Encode, start the caches for ``copies`` rows per input; the rows and each input's limit."""
    if cfg.min_len > ens.max_positions - 1:
        raise MtkitError(f"--min-len {cfg.min_len} exceeds the model's max_positions")
    ids = ens.special_ids
    cap = ens.max_positions - 1
    limits = max_target_lengths(
        src, cfg.max_len_a, cfg.max_len_b, cfg.min_len, cap, ids.pad, ens.tag_ids
    )  # (B,)
    ens.start(src, copies, int(limits.max()) + 1)
    r = src.shape[0] * copies
    zeros = torch.zeros(r, device=src.device)
    tokens = torch.full((r, 1), ids.bos, dtype=torch.long, device=src.device)
    steps = torch.zeros(r, 0, device=src.device)
    rows = Rows(tokens, zeros, zeros.clone(), limits.repeat_interleave(copies), steps)
    return rows, limits.tolist()


def search_lprobs(
    lprobs: Tensor,
    rows: Rows,
    step: int,
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
