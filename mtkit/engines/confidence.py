"""How sure the model was of a translation: its log-probabilities per piece and per word.

An engine asked for scores (``SearchConfig.scores``) gives each hypothesis a
:class:`Confidence`: the model's log-probability of every target piece it generated, EOS last
(they sum to the hypothesis' log-probability), and the pieces grouped into the whitespace words
of the detokenized text (:func:`mtkit.engines.alignment.word_indices`). Every score is read
from these two, here and nowhere else:

- ``normalized``: the length-normalised log-probability, logprob / (pieces + 1), EOS counted.
  It equals the n-best list's SCORE under the default search (``--lenpen 1``, fairseq style,
  no UNK penalty), whose ranking score is logprob / len**lenpen with len counting EOS.
- ``mean_prob``: the mean of the pieces' probabilities (exp of each log-probability).
- ``min_prob``: the least likely piece's probability.
- ``probability``: the one number a user reads as "confidence", in [0, 1]: exp(normalized),
  the geometric mean of the pieces' probabilities (``benchmarks/bench_confidence.py`` compares
  the candidates against sentence chrF).
- per word: the mean log-probability of its pieces (a word with no piece, one copied verbatim
  by the text layer, scores 0: certain).

Worked example: pieces ``▁Ein ▁Ha us`` with log-probabilities -0.1, -1.0, -0.2 and EOS -0.3:
words ``Ein`` (-0.1) and ``Haus`` ((-1.0 - 0.2) / 2 = -0.6); normalized -1.6 / 4 = -0.4.

A text made of several translated units (sentences, parts of a long one) combines them in
:mod:`mtkit.text.confidence`: pieces are concatenated, so a line's normalized score is the
token-weighted mean of its sentences' (sum of log-probabilities over sum of pieces + EOS).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mtkit.engines.alignment import WORD_START, word_indices

Pieces = tuple[float, ...]  # log-probabilities of target pieces


@dataclass(frozen=True)
class Confidence:
    """A translation's piece log-probabilities (``tokens``, EOS last; several EOS for a text
    of several units), per whitespace word of its text its pieces' (``words``), and their sum
    as the engine added them (``logprob``: the search's own sum, so that ``normalized`` is to
    the last bit the n-best list's score under the default length penalty)."""

    tokens: Pieces = ()
    words: tuple[Pieces, ...] = ()
    logprob: float = 0.0

    @property
    def normalized(self) -> float:
        """logprob / (pieces + EOS); 0 for nothing translated (as the n-best list's score)."""
        return self.logprob / len(self.tokens) if self.tokens else 0.0

    @property
    def mean_prob(self) -> float:
        """The mean of the pieces' probabilities (1 for nothing translated)."""
        return math.fsum(map(math.exp, self.tokens)) / len(self.tokens) if self.tokens else 1.0

    @property
    def min_prob(self) -> float:
        """The least likely piece's probability (1 for nothing translated)."""
        return math.exp(min(self.tokens)) if self.tokens else 1.0

    @property
    def probability(self) -> float:
        """The confidence a user reads, in [0, 1]: the geometric mean piece probability."""
        return math.exp(self.normalized)

    def word_scores(self) -> list[float]:
        """Per whitespace word: the mean log-probability of its pieces (0: none, verbatim)."""
        return [math.fsum(word) / len(word) if word else 0.0 for word in self.words]


def piece_confidence(
    pieces: Sequence[str],
    logprobs: Sequence[float],
    words: int,
    total: float | None = None,
    unk: str = "",
) -> Confidence:
    """A hypothesis' :class:`Confidence` from its target ``pieces`` (EOS not among them) and
    their ``logprobs`` (one more: EOS last); ``words``: the detokenized text's whitespace word
    count, which the piece words are kept within (a piece word past the last joins it, a text
    word with no piece gets none), as :func:`~mtkit.engines.alignment.word_alignment` does;
    ``total``: the engine's sum of ``logprobs`` (default: their sum here); ``unk``: the
    unknown piece, which sentencepiece writes as a word of its own (`` ⁇ ``)."""
    if len(logprobs) != len(pieces) + 1:
        raise ValueError(f"{len(logprobs)} log-probabilities for {len(pieces)} pieces and EOS")
    grouped: list[list[float]] = [[] for _ in range(words)]
    if words:
        for index, logprob in zip(word_indices(surface(pieces, unk)), logprobs, strict=False):
            grouped[min(index, words - 1)].append(logprob)
    total = math.fsum(logprobs) if total is None else total
    return Confidence(tuple(logprobs), tuple(tuple(word) for word in grouped), total)


def surface(pieces: Sequence[str], unk: str) -> list[str]:
    """``pieces`` as words start in the detokenized text: the unknown piece (written `` ⁇ ``,
    spaces around it) starts a word, and so does the piece after it."""
    if not unk or unk not in pieces:
        return list(pieces)
    out = []
    for i, piece in enumerate(pieces):
        starts = piece == unk or (i > 0 and pieces[i - 1] == unk)
        out.append(WORD_START + piece if starts and not piece.startswith(WORD_START) else piece)
    return out
