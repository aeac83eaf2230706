"""A second cut for sentences the segmenter merged: notice a translation that covers too little
of its source and cut the source where the missing sentence most likely starts.

A line that ends without punctuation runs into the next one ("a child splashing in the water
Three people sit at a table."): no segmenter can see that boundary, and a sentence-level model
translates the first sentence and stops. The evidence is the translation's length: a unit of at
least :data:`MIN_WORDS` source words whose best translation has fewer than :data:`MIN_RATIO`
words per source word covers too little. Only then is it cut, and only at a *candidate*: a
space between a word ending in a lowercase letter and one starting with an uppercase letter,
the candidate nearest to where the translation's coverage ends (its words mapped back through
the ratio). Capital letters alone never cut; a unit without a candidate stays whole. The two
parts are translated again and their translations joined with a space.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mtkit.engines.base import Translation

MIN_WORDS = 6  # shorter units are never cut again
MIN_RATIO = 0.6  # target words per source word below which a translation covers too little
START = re.compile(r"(?<=[a-zà-ÿ])\s+(?=[A-ZÀ-Þ])")  # lowercase word end, space, capital


def short_units(
    units: Sequence[str], results: Sequence[Sequence[Translation]]
) -> dict[int, list[str]]:
    """Units whose translation covers too little, each with the two parts to translate."""
    found = {}
    for i, (unit, hyps) in enumerate(zip(units, results, strict=True)):
        words = len(unit.split())
        if words < MIN_WORDS or not hyps:
            continue
        ratio = len(hyps[0].text.split()) / words
        if ratio < MIN_RATIO and (cut := _cut(unit, ratio)) is not None:
            found[i] = [unit[: cut[0]], unit[cut[1] :]]
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
    results: Sequence[Sequence[Translation]],
    parts: dict[int, list[str]],
    part_results: Sequence[Sequence[Translation]],
) -> list[list[Translation]]:
    """``results`` with each unit of ``parts`` replaced by its parts' best translations joined
    with a space (one hypothesis: scores summed)."""
    out = [list(hyps) for hyps in results]
    at = 0
    for i, pieces in parts.items():
        hyps = [h[0] for h in part_results[at : at + len(pieces)] if h]
        at += len(pieces)
        if hyps:
            text = " ".join(h.text.strip() for h in hyps if h.text.strip())
            out[i] = [Translation(text, sum(h.score for h in hyps), sum(h.logprob for h in hyps),
                                  sum(h.tokens for h in hyps))]  # fmt: skip
    return out
