"""Confidence carried from the units a text was cut into to the whole text.

An engine scores each unit it translated (:class:`~mtkit.engines.confidence.Confidence`:
piece log-probabilities, and per whitespace word of the unit's translation its pieces'). The
text layer joins units into sentences and sentences into texts and restores masked spans; the
confidence follows, as the word alignments do (:mod:`mtkit.text.aligned`):

- pieces are concatenated, every unit's EOS included: a line's length-normalised score is the
  token-weighted mean of its units' (their summed log-probabilities over their summed pieces +
  EOS), so a long sentence weighs more than a short one, and a line's score equals its only
  sentence's when it has one;
- each word of the whole gets the pieces of the unit words it is made of, found by character
  offset (a word cut in two for the model's limit, or two sentences written without a space,
  are one word of the whole, scored over all their pieces);
- a span restored verbatim (a URL, a number, an emoji) was copied, not translated: its words
  have no pieces and score 0 (certain); a placeholder the model wrote and the text layer
  removed leaves its pieces in the sentence score only.
"""

from __future__ import annotations

from collections.abc import Sequence

from mtkit.engines.confidence import Confidence
from mtkit.text.aligned import glued, word_map, word_starts


def joined_confidence(
    parts: Sequence[tuple[str, Confidence]], glue: Sequence[str], dropped: Sequence[Confidence] = ()
) -> Confidence:
    """The confidence of translations ``parts`` (text, its confidence) joined with ``glue``
    (as :func:`mtkit.text.aligned.joined` joins them); ``dropped``: units left out of the text
    (an empty translation) whose pieces still count in the score."""
    text, starts = glued([part for part, _ in parts], glue)
    whole = word_starts(text)
    words: list[list[float]] = [[] for _ in whole]
    for (part, found), start in zip(parts, starts, strict=True):
        for i, w in enumerate(word_map(part, start, whole)):
            if i < len(found.words):
                words[w].extend(found.words[i])
    every = [found for _, found in parts] + list(dropped)
    tokens = tuple(t for found in every for t in found.tokens)
    return Confidence(tokens, tuple(tuple(word) for word in words), _sum(every))


def regrouped(found: Confidence, sources: Sequence[Sequence[int]]) -> Confidence:
    """``found`` for a text whose word w is made of the words ``sources[w]`` of the text it
    was scored on (spans restored: :meth:`mtkit.text.span_masking.Masked.word_sources`)."""
    words = [
        tuple(p for i in index if i < len(found.words) for p in found.words[i]) for index in sources
    ]
    return Confidence(found.tokens, tuple(words), found.logprob)


def _sum(parts: Sequence[Confidence]) -> float:
    """The parts' summed log-probability (one part's: exactly its own, as 0.0 + x == x)."""
    return sum((part.logprob for part in parts), 0.0)
