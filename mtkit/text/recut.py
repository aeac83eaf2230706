"""A second cut for sentences the segmenter merged: notice a translation that covers too little
of its source and cut the source where the missing sentence most likely starts.

A line that ends without punctuation runs into the next one ("a child splashing in the water
Three people sit at a table."): no segmenter can see that boundary, and a sentence-level model
translates the first sentence and stops. The evidence is the translation's length: a unit of at
least :data:`MIN_WORDS` source words whose best translation has fewer than :data:`MIN_SHARE`
of the words expected covers too little. Expected: one word per source word, unless the text's
units (at least :data:`MIN_UNITS`) typically get fewer than :data:`DENSE` words per source
word (a target script written without spaces, such as Chinese): then their median ratio, so
that such a script is not taken for short translations. Only then is a unit cut, and only at
a *candidate*: a space between a word ending in a lowercase letter and one starting with an
uppercase letter, the candidate nearest to where the translation's coverage ends. Capital
letters alone never cut; a unit without a candidate stays whole. The two parts are translated
again and their translations joined with a space. (Measured on the en-de demo model: words
did better than characters, whose ratio German's long compounds blur.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mtkit.engines.base import Translation
from mtkit.engines.confidence import Confidence
from mtkit.engines.guard import joined_ways
from mtkit.text.aligned import Part, joined, located
from mtkit.text.confidence import joined_confidence

MIN_WORDS = 6  # shorter units are never cut again
MIN_UNITS = 5  # units needed to tell a text's typical ratio
MIN_SHARE = 0.6  # of the expected translation words, below which a translation covers too little
DENSE = 0.5  # a typical ratio below this: a script without spaces, its median is the expectation
START = re.compile(r"(?<=[a-zà-ÿ])\s+(?=[A-ZÀ-Þ])")  # lowercase word end, space, capital


def short_units(
    units: Sequence[str], results: Sequence[Sequence[Translation]], texts: Sequence[int] = ()
) -> dict[int, list[str]]:
    """Units whose translation covers too little, each with the two parts to translate.
    ``texts``: how many units each text has, in order (the typical ratio is each text's own,
    so that a text's translation never depends on the texts beside it); () for one text."""
    found, start = {}, 0
    for count in texts or [len(units)]:
        found.update(_short(units, results, range(start, start + count)))
        start += count
    return found


def _short(
    units: Sequence[str], results: Sequence[Sequence[Translation]], index: range
) -> dict[int, list[str]]:
    sized = [
        (i, len(units[i].split()), len(results[i][0].text.split()))
        for i in index
        if results[i] and len(units[i].split()) >= MIN_WORDS
    ]
    ratios = sorted(target / source for _, source, target in sized)
    median = ratios[len(ratios) // 2] if len(ratios) >= MIN_UNITS else 1.0
    typical = median if median < DENSE else 1.0
    found = {}
    for i, source, target in sized:
        covered = target / (source * typical) if typical > 0 else 1.0
        if covered < MIN_SHARE and (cut := _cut(units[i], covered)) is not None:
            found[i] = [units[i][: cut[0]], units[i][cut[1] :]]
    return found


def _cut(unit: str, covered: float) -> tuple[int, int] | None:
    """The candidate space (start, end) nearest the character where ``covered`` (a share of
    the unit's words) ends; None without a candidate."""
    spaces = [(m.start(), m.end()) for m in START.finditer(unit)]
    if not spaces:
        return None
    target = len(unit) * min(covered, 1.0)
    return min(spaces, key=lambda span: abs(span[0] - target))


def merged(
    units: Sequence[str],
    results: Sequence[Sequence[Translation]],
    parts: dict[int, list[str]],
    part_results: Sequence[Sequence[Translation]],
) -> list[list[Translation]]:
    """``results`` with each unit of ``parts`` replaced by its parts' best translations joined
    with a space (one hypothesis: scores summed; the alignment re-indexed to the unit, the
    confidence joined, how the decoding guard translated any part kept)."""
    out = [list(hyps) for hyps in results]
    at = 0
    for i, pieces in parts.items():
        found = part_results[at : at + len(pieces)]
        at += len(pieces)
        kept = [
            Part(piece, offset, hyps[0].text.strip(), hyps[0].alignment)
            for piece, offset, hyps in zip(pieces, located(units[i], pieces), found, strict=True)
            if hyps and hyps[0].text.strip()
        ]
        hyps = [h[0] for h in found if h]
        if kept:
            glue = [""] + [" "] * (len(kept) - 1) + [""]
            text, alignment = joined(units[i], kept, glue)
            guard = joined_ways(h.guard for h in hyps)
            out[i] = [
                Translation(
                    text,
                    sum(h.score for h in hyps),
                    sum(h.logprob for h in hyps),
                    sum(h.tokens for h in hyps),
                    alignment,
                    _confidence(kept, hyps, glue),
                    guard,
                )
            ]
    return out


def _confidence(kept: list[Part], hyps: list[Translation], glue: list[str]) -> Confidence | None:
    """The joined parts' confidence (None unless every part has one): see
    :mod:`mtkit.text.confidence`; a part translated as nothing keeps its pieces in the score."""
    if any(h.confidence is None for h in hyps):
        return None
    scored = [(h.text.strip(), h.confidence) for h in hyps if h.text.strip() and h.confidence]
    dropped = [h.confidence for h in hyps if not h.text.strip() and h.confidence]
    return joined_confidence(scored, glue, dropped)
