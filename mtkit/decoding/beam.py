"""Pure tensor functions for search: constraints, length penalty, and one beam step.

Nothing here sees a model; the search loop in :mod:`mtkit.decoding.search` feeds these functions
the log-probabilities of one step. Shapes: R rows being decoded (N sentences x K beams), V the
target vocabulary, t the number of tokens generated so far.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from mtkit.config import LENPEN_STYLES
from mtkit.data.tokenizer import DEFAULT_SPECIAL_IDS, EOS_ID, PAD_ID, SpecialIds


def length_penalty(length: Tensor | float, alpha: float, style: str = "fairseq") -> Tensor | float:
    """The divisor of a hypothesis' log-probability; ``length`` counts its tokens incl. EOS.

    fairseq: ``length ** alpha``; gnmt: ``((5 + length) / 6) ** alpha`` (Wu et al., 2016, eq. 14).
    ``alpha = 0`` ranks by raw log-probability; larger ``alpha`` favours longer outputs.

    >>> length_penalty(4.0, 1.0), length_penalty(4.0, 1.0, "gnmt")
    (4.0, 1.5)
    """
    if style == "fairseq":
        return length**alpha
    if style == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    raise ValueError(f"unknown length penalty style {style!r} (known: {', '.join(LENPEN_STYLES)})")


def ban_repeated_ngrams(lprobs: Tensor, history: Tensor, n: int, pad: int = PAD_ID) -> None:
    """In place: forbid every token that would repeat an n-gram already in ``history``.

    lprobs (R, V); history (R, t) the tokens generated so far (no BOS). With history
    ``[5, 6, 7, 5]`` and n = 2, token 6 is banned (it would repeat the bigram ``5 6``).
    """
    t = history.shape[1]
    if n <= 0 or t < n:
        return
    if n == 1:
        lprobs.scatter_(1, history, -math.inf)
        return
    windows = history.unfold(1, n, 1)  # (R, t - n + 1, n)
    prefix = history[:, t - n + 1 :]  # (R, n - 1): the n-gram the next token would complete
    match = windows[:, :, :-1].eq(prefix[:, None, :]).all(-1)  # (R, t - n + 1)
    banned = windows[:, :, -1].masked_fill(~match, pad)  # PAD is banned anyway
    lprobs.scatter_(1, banned, -math.inf)


def constrain(
    lprobs: Tensor,
    step: int | Tensor,
    history: Tensor,
    max_lens: Tensor,
    force_from: int,
    min_len: int = 0,
    unk_penalty: float = 0.0,
    no_repeat_ngram: int = 0,
    ids: SpecialIds = DEFAULT_SPECIAL_IDS,
) -> Tensor:
    """In place: apply the search rules to one step's log-probabilities (R, V); returns them.

    PAD and BOS are never generated; UNK loses ``unk_penalty``; EOS is banned while fewer than
    ``min_len`` tokens exist; ``no_repeat_ngram`` bans repeats (should it ban every token, EOS
    is allowed after all); a row whose ``max_lens`` (R,) is reached may only emit EOS.
    ``force_from`` = ``min(max_lens)`` lets most steps skip that last rule. ``ids`` are the
    model's special ids (PAD, BOS = the start token, UNK, EOS). ``step``: the tokens each row
    has, one number for all or a tensor (R,) (rows that joined a running decode).
    """
    end = ids.eos
    lprobs[:, ids.pad] = -math.inf
    lprobs[:, ids.bos] = -math.inf
    if unk_penalty:
        lprobs[:, ids.unk] -= unk_penalty
    eos = lprobs[:, end].clone()
    if isinstance(step, Tensor):
        lprobs[:, end].masked_fill_(step.lt(min_len), -math.inf)
    elif step < min_len:
        lprobs[:, end] = -math.inf
    if no_repeat_ngram:
        ban_repeated_ngrams(lprobs, history, no_repeat_ngram, ids.pad)
        stuck = lprobs.amax(1).eq(-math.inf)  # every token banned: allow EOS after all
        lprobs[:, end] = torch.where(stuck, eos, lprobs[:, end])
    if isinstance(step, Tensor) or step >= force_from:
        forced = max_lens.le(step)  # (R,)
        if lprobs.device.type != "cpu" or bool(forced.any()):  # a CPU: no R x V pass for none
            lprobs.masked_fill_(forced[:, None], -math.inf)
            lprobs[:, end] = torch.where(forced, eos, lprobs[:, end])
    return lprobs


class Candidates(NamedTuple):
    """The 2K best extensions of each sentence's beams, best first; each (N, 2K)."""

    scores: Tensor  # cumulative search score
    beams: Tensor  # which beam (0..K-1) each candidate extends
    tokens: Tensor  # the token it appends
    flat: Tensor  # beam * V + token, to gather other per-(beam, token) values


CHUNK = 128  # vocabulary entries per chunk in beam_candidates' first stage


def beam_candidates(lprobs: Tensor, scores: Tensor, count: int, chunk: int = CHUNK) -> Candidates:
    """One beam step (fairseq's ``BeamSearch.step``): the top ``count`` over beams x vocabulary.

    lprobs (N, W, V) this step's log-probabilities of each sentence's W live beams, scores
    (N, W) their cumulative scores. With ``count`` = 2K for a beam of K, K candidates that do
    not end in EOS always remain (each beam adds at most one EOS), so finished hypotheses never
    starve the beam.

    In two stages, exactly, so that the sort touches a few thousand values instead of W x V:
    each beam's vocabulary is cut into chunks of ``chunk`` tokens, and the top ``count``
    candidates all lie in the ``count`` chunks with the highest maxima (score + the chunk's
    best log-probability), or in the tail of each beam's vocabulary after its last whole
    chunk: a chunk holding a candidate above the count-th best value v has a maximum above v,
    so fewer than ``count`` such chunks exist and all are taken first, and the chunks taken
    next (maximum v) hold the candidates equal to v. Only those chunks' values and the tails
    compete in the final top-k. A maximum over contiguous chunks is one vectorised
    pass; on the 2-core Zen 4 this step took 0.5 ms instead of 2.0 ms for 32 sentences x 5
    beams x 8,000 tokens (benchmarks/README.md, "Where a beam step's time goes"). Which of two
    equal candidates comes first is unspecified, as in ``torch.topk``.
    """
    n, w, v = lprobs.shape
    whole = v // chunk  # whole chunks per beam; the rest (the tail) always competes
    starts = lprobs.new_empty((n, 0), dtype=torch.long)
    if whole:
        maxima = lprobs[:, :, : whole * chunk].unflatten(2, (whole, chunk)).amax(3)  # (N, W, C)
        maxima = (scores.unsqueeze(-1) + maxima).view(n, w * whole)
        picked = maxima.topk(min(count, w * whole), dim=1).indices  # beam * C + chunk
        beams = torch.div(picked, whole, rounding_mode="floor")
        starts = beams * v + (picked - beams * whole) * chunk  # (N, c) first flat position
    offsets = torch.arange(chunk, device=lprobs.device)
    pool = (starts.unsqueeze(-1) + offsets).view(n, -1)
    if whole * chunk < v:
        tail = torch.arange(w, device=lprobs.device).unsqueeze(-1) * v
        tail = (tail + torch.arange(whole * chunk, v, device=lprobs.device)).view(1, -1)
        pool = torch.cat([pool, tail.expand(n, -1)], 1)
    values = lprobs.reshape(n, w * v).gather(1, pool)
    values += scores.gather(1, torch.div(pool, v, rounding_mode="floor"))
    top, pos = values.topk(min(count, w * v), dim=1)
    flat = pool.gather(1, pos)
    beams = torch.div(flat, v, rounding_mode="floor")
    return Candidates(top, beams, flat - beams * v, flat)


def finished_mask(cand: Candidates, beam: int, eos: int = EOS_ID) -> Tensor:
    """(N, 2K) True where a candidate ends in EOS with a finite score among the top K."""
    mask = cand.tokens.eq(eos) & cand.scores.isfinite()
    mask[:, beam:] = False
    return mask


def select_active(tokens: Tensor, beam: int, eos: int = EOS_ID) -> Tensor:
    """Positions (N, K) of the K best candidates that do not end in EOS, best first.

    >>> select_active(torch.tensor([[3, 7, 3, 8]]), 2).tolist()  # 3 is EOS
    [[1, 3]]
    """
    c = tokens.shape[1]
    order = torch.arange(c, device=tokens.device) + tokens.eq(eos) * c
    return order.topk(beam, dim=1, largest=False).indices


def max_target_lengths(
    src: Tensor,
    a: float,
    b: int,
    min_len: int,
    cap: int,
    pad: int = PAD_ID,
    tags: Sequence[int] = (),
) -> Tensor:
    """Per sentence (B,): at most ``a * source_pieces + b`` tokens before EOS, within [min, cap].

    ``source_pieces`` counts the source row's tokens without padding and without its EOS, and
    without a leading target-language tag (one of the ids ``tags``, issue 16).
    """
    pieces = src.ne(pad).sum(1) - 1
    if tags:
        pieces = pieces - torch.isin(src[:, 0], torch.tensor(tags, device=src.device)).long()
    return torch.floor(a * pieces.double() + b).long().clamp(min=min_len, max=cap)
