"""Batched generation with the model's KV cache: beam search, greedy decoding and sampling.

``generate(models, src, config)`` is the one entry point. Several models form an ensemble that
averages their log-probabilities at each step (renormalised). The encoder runs once per batch,
cross-attention keys/values are computed once per source sentence and held once (a sentence's
beams attend to them together, after a first step that runs one row per sentence), and every
step feeds only the newest token (``decode_step``). Sentences that finish leave the batch, so
the work shrinks as they end.

Beam search follows fairseq's split (Ott et al., 2019): :func:`mtkit.decoding.beam.beam_candidates`
is the pure per-step top-2K, :func:`beam_search` the bookkeeping. A hypothesis is finished when
it emits EOS among the top K candidates; a sentence is done once it has K finished hypotheses
(or its length limit forces EOS). Hypotheses rank by ``logprob / length_penalty(len)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from mtkit.config import SearchConfig
from mtkit.data.tokenizer import DEFAULT_SPECIAL_IDS, SpecialIds
from mtkit.decoding.beam import (
    Candidates,
    beam_candidates,
    constrain,
    finished_mask,
    length_penalty,
    max_target_lengths,
    select_active,
)
from mtkit.decoding.constraints import Constraints
from mtkit.decoding.protocol import DecodingState, StepDecoder
from mtkit.decoding.sampling import greedy_tokens, sample_tokens
from mtkit.errors import MtkitError

if TYPE_CHECKING:
    from mtkit.decoding.speculative import Draft


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


class Ensemble:
    """Several models decoding in lockstep, each with its own state (one model: no overhead).

    The ensemble distribution is the renormalised mean of the models' log-probabilities.
    """

    def __init__(self, models: list[StepDecoder]) -> None:
        if not models:
            raise MtkitError("no model to decode with")
        sizes = {m.tgt_vocab_size for m in models}
        if len(sizes) > 1:
            raise MtkitError(f"ensembled models have different target vocabularies {sorted(sizes)}")
        self.models = models
        self.special_ids = special_ids_of(models)
        self.tag_ids = models[0].tag_ids  # see max_target_lengths
        self.max_positions = min(m.max_positions for m in models)
        self.states: list[DecodingState] = []

    def start(self, src: Tensor, copies: int, max_len: int) -> None:
        """Encode src (B, S) and start states for B * copies rows (copies of a row adjacent,
        each with its own copy of the source state, since copies leave independently)."""
        rows = torch.arange(src.shape[0], device=src.device).repeat_interleave(copies)
        self.states = []
        for model in self.models:
            state = model.start_state(model.encode(src), max_len)
            if copies > 1:
                state.reorder(rows, rows)
            self.states.append(state)

    def step(self, tokens: Tensor) -> Tensor:
        """Feed tokens (R,); return next-token log-probabilities (R, V) in float32."""
        return _averaged([m.decode_step(tokens, s) for m, s in zip(self.models, self.states,
                                                                    strict=True)])  # fmt: skip

    def steps(self, tokens: Tensor) -> Tensor:
        """Feed n tokens per row at once, tokens (R, n); return the log-probabilities after each
        (R, n, V) in float32 (speculative decoding; the models need ``decode_steps``)."""
        return _averaged([m.decode_steps(tokens, s) for m, s in zip(self.models, self.states,
                                                                     strict=True)])  # fmt: skip

    def truncate(self, length: int) -> None:
        """Roll every model's state back to its first ``length`` positions."""
        for state in self.states:
            state.truncate(length)

    def reorder(self, rows: Tensor, sources: Tensor | None) -> None:
        """Keep rows ``rows``; ``sources`` selects the source rows they share (see
        :class:`DecodingState`), None when rows only move among one sentence's beams."""
        for state in self.states:
            state.reorder(rows, sources)

    def attended(self, row: int) -> Tensor | None:
        """Row ``row``'s cross-attention so far as the first model's state recorded it, or
        None (a state that records none, or that has no ``attended``)."""
        attended = getattr(self.states[0], "attended", None) if self.states else None
        return None if attended is None else attended(row)


def _averaged(logits: list[Tensor]) -> Tensor:
    """The ensemble's log-probabilities: each model's in float32, their mean renormalised."""
    lprobs = [x.float().log_softmax(-1) for x in logits]
    if len(lprobs) == 1:
        return lprobs[0]
    return torch.stack(lprobs).mean(0).log_softmax(-1)


def special_ids_of(models: list[StepDecoder]) -> SpecialIds:
    """The models' special ids (mtkit's defaults for a model that names none); all must agree."""
    found = {getattr(m, "special_ids", DEFAULT_SPECIAL_IDS) for m in models}
    if len(found) > 1:
        raise MtkitError(f"ensembled models have different special ids {sorted(map(str, found))}")
    return found.pop()


@dataclass
class _Rows:
    """The rows being decoded (R of them) and their running sums."""

    tokens: Tensor  # (R, t + 1) BOS + tokens so far
    scores: Tensor  # (R,) cumulative search score (penalties included)
    logprobs: Tensor  # (R,) cumulative model log-probability
    max_lens: Tensor  # (R,) tokens allowed before EOS
    steps: Tensor  # (R, t) the model log-probability of each token so far

    def select(self, index: Tensor, tokens: Tensor, scores: Tensor, logprobs: Tensor,
               step: Tensor) -> _Rows:  # fmt: skip
        """Rows ``index`` of this state, extended by one token each (``step``: its model
        log-probability)."""
        history = torch.cat([self.tokens.index_select(0, index), tokens[:, None]], dim=1)
        steps = torch.cat([self.steps.index_select(0, index), step[:, None]], dim=1)
        return _Rows(history, scores, logprobs, self.max_lens.index_select(0, index), steps)

    def extended(self, tokens: Tensor, scores: Tensor, logprobs: Tensor, step: Tensor) -> _Rows:
        """Every row extended by one token (no row leaves)."""
        return _Rows(torch.cat([self.tokens, tokens[:, None]], 1), scores, logprobs,
                     self.max_lens, torch.cat([self.steps, step[:, None]], 1))  # fmt: skip


def _start(ens: Ensemble, src: Tensor, copies: int, config: SearchConfig) -> tuple[_Rows, list]:
    """Encode, start the caches for ``copies`` rows per input; the rows and each input's limit."""
    if config.min_len > ens.max_positions - 1:
        raise MtkitError(f"--min-len {config.min_len} exceeds the model's max_positions")
    ids = ens.special_ids
    limits = max_target_lengths(
        src,
        config.max_len_a,
        config.max_len_b,
        config.min_len,
        ens.max_positions - 1,
        ids.pad,
        ens.tag_ids,
    )  # (B,)
    ens.start(src, copies, int(limits.max()) + 1)
    r = src.shape[0] * copies
    zeros = torch.zeros(r, device=src.device)
    tokens = torch.full((r, 1), ids.bos, dtype=torch.long, device=src.device)
    steps = torch.zeros(r, 0, device=src.device)
    rows = _Rows(tokens, zeros, zeros.clone(), limits.repeat_interleave(copies), steps)
    return rows, limits.tolist()


def _constrained(lprobs: Tensor, rows: _Rows, step: int, force_from: int, cfg: SearchConfig,
                 ids: SpecialIds = DEFAULT_SPECIAL_IDS):  # fmt: skip
    """The search distribution: this step's log-probabilities (R, V), constrained in place."""
    return constrain(lprobs, step, rows.tokens[:, 1:], rows.max_lens, force_from,
                     cfg.min_len, cfg.unk_penalty, cfg.no_repeat_ngram, ids)  # fmt: skip


def _model_logprob(search_lprob: Tensor, tokens: Tensor, cfg: SearchConfig, unk: int) -> Tensor:
    """The models' log-probability of chosen tokens from their search log-probability.

    Of the rules in :func:`constrain`, only the UNK penalty shifts a finite value; the others
    ban tokens (-inf), which are chosen only when nothing else is left.
    """
    if not cfg.unk_penalty:
        return search_lprob
    return search_lprob + cfg.unk_penalty * tokens.eq(unk)


def _hypothesis(tokens: Tensor, score: float, logprob: float, cfg: SearchConfig,
                steps: list[float], attention: Tensor | None = None) -> Hypothesis:  # fmt: skip
    """A finished hypothesis from its tokens (without BOS/EOS), raw sums and per-token terms
    (``steps``, EOS's last), and its recorded cross-attention (or None)."""
    lp = length_penalty(float(len(tokens) + 1), cfg.lenpen, cfg.lenpen_style)
    return Hypothesis(tokens.tolist(), score / lp, logprob, steps, attention)


def _best_first(found: list[list[Hypothesis]], n: int) -> list[list[Hypothesis]]:
    # a real model always finishes something; a degenerate one (EOS impossible) gets a stand-in
    return [
        sorted(hyps, key=lambda h: -h.score)[:n] or [Hypothesis([], -math.inf, -math.inf)]
        for hyps in found
    ]


def row_search(
    ens: Ensemble, src: Tensor, cfg: SearchConfig, generator: torch.Generator | None = None
) -> list[list[Hypothesis]]:
    """Greedy decoding (beam 1), or ``cfg.nbest`` independent samples per input with sampling.

    Each row picks one token per step; rows that emit EOS leave the batch at once.
    """
    copies = cfg.nbest if cfg.sampling else 1
    rows, limits = _start(ens, src, copies, cfg)
    origin = [i // copies for i in range(len(rows.scores))]  # input row of each row
    found: list[list[Hypothesis]] = [[] for _ in limits]
    force_from = min(limits)
    ids = ens.special_ids
    for step in range(max(limits) + 1):
        search = _constrained(ens.step(rows.tokens[:, -1]), rows, step, force_from, cfg, ids)
        if cfg.sampling:
            picked = sample_tokens(search, generator, cfg.temperature, cfg.top_k, cfg.top_p)
        else:
            picked = greedy_tokens(search)
        chosen = search.gather(1, picked[:, None])[:, 0]  # (R,)
        scores = rows.scores + chosen
        model_step = _model_logprob(chosen, picked, cfg, ids.unk)
        logprobs = rows.logprobs + model_step
        ended = picked.eq(ids.eos) | rows.max_lens.le(step)  # (R,)
        if not bool(ended.any()):  # the one host sync of most steps
            rows = rows.extended(picked, scores, logprobs, model_step)
            continue
        for r in ended.nonzero()[:, 0].tolist():
            steps = [*rows.steps[r].tolist(), float(model_step[r])]
            hyp = _hypothesis(rows.tokens[r, 1:], float(scores[r]), float(logprobs[r]), cfg,
                              steps, ens.attended(r))  # fmt: skip
            found[origin[r]].append(hyp)
        keep = (~ended).nonzero()[:, 0]
        if not len(keep):
            break
        ens.reorder(keep, keep)
        rows = rows.select(keep, picked[keep], scores[keep], logprobs[keep], model_step[keep])
        origin = [origin[r] for r in keep.tolist()]
        force_from = min(limits[i] for i in set(origin))
    return _best_first(found, cfg.nbest)


def beam_search(ens: Ensemble, src: Tensor, cfg: SearchConfig) -> list[list[Hypothesis]]:
    """Batched beam search of width ``cfg.width``; the ``cfg.nbest`` best per input, best first.

    ``sents`` maps the N active sentences to input rows; sentence i owns rows i*W..i*W+W-1,
    where W, the live beams per sentence, is 1 at the first step (all beams would be copies of
    BOS) and K afterwards (fewer while the 2K candidates leave fewer than K without EOS, which
    happens only with vocabularies smaller than 2K + 1).
    """
    k = cfg.width
    rows, limits = _start(ens, src, 1, cfg)
    sents = list(range(len(limits)))
    found: list[list[Hypothesis]] = [[] for _ in limits]
    ids = ens.special_ids
    for step in range(max(limits) + 1):
        n, w = len(sents), rows.tokens.shape[0] // len(sents)
        force_from = min(limits[s] for s in sents)
        search = _constrained(ens.step(rows.tokens[:, -1]), rows, step, force_from, cfg, ids)
        cand = beam_candidates(search.view(n, w, -1), rows.scores.view(n, w), 2 * k)  # (N, 2K)
        chosen = search.view(n, -1).gather(1, cand.flat)  # (N, 2K) this step's search lprob
        cand_steps = _model_logprob(chosen, cand.tokens, cfg, ids.unk)  # (N, 2K)
        cand_logprobs = rows.logprobs.view(n, w).gather(1, cand.beams) + cand_steps
        _finalize(cand, cand_logprobs, cand_steps, rows, [found[s] for s in sents], cfg, ids.eos,
                  ens.attended)  # fmt: skip
        alive = [i for i, s in enumerate(sents) if len(found[s]) < k and step < limits[s]]
        if not alive:
            break
        width = min(k, cand.tokens.shape[1] - w)  # K unless the vocabulary is tiny
        pos = select_active(cand.tokens, width, ids.eos)  # (N, K) surviving candidates, best first
        keep = torch.arange(n, device=src.device)
        if len(alive) < n:  # finished sentences leave the batch
            keep = torch.tensor(alive, device=src.device)
            pos, cand_logprobs = pos.index_select(0, keep), cand_logprobs.index_select(0, keep)
            cand_steps = cand_steps.index_select(0, keep)
            cand = Candidates(*(x.index_select(0, keep) for x in cand))
            sents = [sents[i] for i in alive]
        index = (keep[:, None] * w + cand.beams.gather(1, pos)).view(-1)  # (N' * K,) old rows
        # a sentence's beams share one source row; beam moves within a sentence leave it alone
        ens.reorder(index, keep if len(alive) < n or width != w else None)
        rows = rows.select(index, cand.tokens.gather(1, pos).view(-1),
                           cand.scores.gather(1, pos).view(-1),
                           cand_logprobs.gather(1, pos).view(-1),
                           cand_steps.gather(1, pos).view(-1))  # fmt: skip
    return _best_first(found, cfg.nbest)


def _finalize(
    cand: Candidates,
    cand_logprobs: Tensor,
    cand_steps: Tensor,
    rows: _Rows,
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
    for i, beam, score, logprob, eos_step in zip(where, beams, scores, logprobs, last,
                                                 strict=True):  # fmt: skip
        if len(found[i]) < k:
            row = i * w + beam
            steps = [*rows.steps[row].tolist(), eos_step]
            found[i].append(_hypothesis(rows.tokens[row, 1:], score, logprob, cfg, steps,
                                        attended(row)))  # fmt: skip


def generate(
    models: list[StepDecoder],
    src: Tensor,
    config: SearchConfig,
    generator: torch.Generator | None = None,
    constraints: Sequence[Constraints] | None = None,
    draft: Draft | None = None,
) -> list[list[Hypothesis]]:
    """Translate src (B, S), rows = ids + EOS right-padded with PAD; per row, best first.

    Special ids (start token, EOS, PAD, UNK) are the models' ``special_ids``
    (:class:`~mtkit.data.tokenizer.SpecialIds`; mtkit's defaults for a model without them).

    Beam search for ``beam > 1``, greedy for ``beam == 1``, sampling with ``config.sampling``
    (``generator``, or one seeded with ``config.seed``). Returns ``config.nbest`` hypotheses per
    row (fewer only if fewer finite-score hypotheses exist, as with tiny vocabularies).
    Models in training mode are switched to eval mode for the call and back afterwards.

    ``constraints`` (one per row) make it a lexically constrained beam search
    (:mod:`mtkit.decoding.constrained`; at any width, beam 1 included), which sampling is not.

    ``draft`` (a small model with the same vocabularies) makes greedy decoding speculative
    (:mod:`mtkit.decoding.speculative`): the same output, fewer passes of the models; searches
    other than plain greedy decoding do not use it.
    """
    if constraints is not None and config.sampling:
        raise MtkitError("--sampling cannot honour constraints; use beam search")
    if constraints is not None and len(constraints) != src.shape[0]:
        raise MtkitError(f"{len(constraints)} constraint sets for {src.shape[0]} inputs")
    ens = Ensemble(models)
    training = [m.training for m in models]
    device = next(models[0].parameters()).device
    src = src.to(device)
    try:
        for m in models:
            m.eval()
        with torch.inference_mode():
            if config.sampling:
                if generator is None:
                    generator = torch.Generator(device).manual_seed(config.seed)
                return row_search(ens, src, config, generator)
            if constraints is not None:
                from mtkit.decoding.constrained import constrained_search

                return constrained_search(ens, src, config, constraints)
            if config.width == 1 and draft is not None:
                from mtkit.decoding.speculative import speculative_search

                return speculative_search(ens, draft, src, config)
            if config.width == 1:
                return row_search(ens, src, config)
            return beam_search(ens, src, config)
    finally:
        for m, mode in zip(models, training, strict=True):
            m.train(mode)
