"""Word alignments carried from the parts a text was cut into to the whole text.

An engine aligns each unit it translated (a sentence, or part of one) with its translation, as
Moses pairs over the unit's whitespace words (:mod:`mtkit.engines.alignment`). The text layer
joins units into sentences and sentences into texts; :func:`joined` re-indexes the pairs on the
way: a word of a part is found in the whole by its character offset, so that a word cut in two
(a long run without spaces cut for the model's limit) or two sentences written without a space
between them map to the one whitespace word of the whole text they are part of.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from mtkit.engines.alignment import Alignment


@dataclass(frozen=True)
class Part:
    """A translated part of a whole: its source ``text`` at character ``offset`` of the whole
    source, its ``translation`` and the pairs between them (None: the engine gave none)."""

    text: str
    offset: int
    translation: str
    alignment: Alignment | None


def word_starts(text: str) -> list[int]:
    """Where each whitespace word of ``text`` starts (the words of ``text.split()``)."""
    starts, inside = [], False
    for i, char in enumerate(text):
        if char.isspace():
            inside = False
        elif not inside:
            starts.append(i)
            inside = True
    return starts


def word_map(part: str, offset: int, whole: list[int]) -> list[int]:
    """The word of the whole (starts ``whole``) that each word of ``part``, found at
    character ``offset`` of the whole, falls in."""
    return [max(0, bisect_right(whole, offset + start) - 1) for start in word_starts(part)]


def joined(source: str, parts: Sequence[Part], glue: Sequence[str]) -> tuple[str, Alignment | None]:
    """The parts' translations joined (``glue[k]`` before part k, and ``glue[-1]`` after the
    last: one more glue than parts), and their pairs over the words of ``source`` (the whole)
    and of the joined translation; None if any part has no alignment."""
    text, starts = glued([part.translation for part in parts], glue)
    if any(part.alignment is None for part in parts):
        return text, None
    src_whole, tgt_whole = word_starts(source), word_starts(text)
    pairs = set()
    for part, start in zip(parts, starts, strict=True):
        src = word_map(part.text, part.offset, src_whole)
        tgt = word_map(part.translation, start, tgt_whole)
        pairs.update(
            (src[i], tgt[j]) for i, j in part.alignment or () if i < len(src) and j < len(tgt)
        )
    return text, tuple(sorted(pairs))


def glued(parts: Sequence[str], glue: Sequence[str]) -> tuple[str, list[int]]:
    """``parts`` joined, ``glue[k]`` before part k and ``glue[-1]`` after the last, and where
    each part starts in the result."""
    out, starts = [glue[0]], []
    at = len(glue[0])
    for part, after in zip(parts, glue[1:], strict=True):
        starts.append(at)
        out += [part, after]
        at += len(part) + len(after)
    return "".join(out), starts


def located(whole: str, parts: Sequence[str]) -> list[int]:
    """Where each of ``parts`` (substrings of ``whole``, in order, not overlapping) starts."""
    offsets, at = [], 0
    for part in parts:
        found = whole.find(part, at)
        offsets.append(found if found >= 0 else at)
        at = (found if found >= 0 else at) + len(part)
    return offsets
