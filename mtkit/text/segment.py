"""Cut a text into sentences, keeping every character of it: :func:`segment`.

The segmenter is sentencex (Wikimedia's, ~300 languages with fallbacks, rule-based, released
2026). Measured against pysbd 0.3.4 (last release 2021) on Multi30k test_2016_flickr joined four
sentences to a line (250 lines), the share of lines cut exactly at the original sentence
boundaries is the same or nearly so (en: 214/250 both; de: 230/250 sentencex, 233/250 pysbd),
and sentencex is about 100x faster (en: 4 ms against 482 ms for the 250 lines). Kept up to
date, many languages, fast: sentencex.

Rules kept whatever the segmenter says: a line break always ends a sentence (paragraphs,
blank lines, list items); whitespace (and a byte-order mark) at the edges of a sentence belongs
to the gaps; no character other than those is ever left out of a sentence. A sentence longer
than a model's limit is cut further by :func:`cut_long` at a safe point; sentences the
segmenter merged (a line that ends without punctuation) are found after translation and cut
again by :mod:`mtkit.text.recut`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from mtkit.text.annotated import AnnotatedText

# a line break of any kind (what str.splitlines breaks on): always between sentences
LINES = re.compile(r"[^\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]+")
EDGES = "\ufeff\u200b"  # not whitespace to str.isspace, yet nothing to translate


def is_gap(char: str) -> bool:
    """Whether ``char`` belongs in a gap when it is at the edge of a sentence."""
    return char.isspace() or char in EDGES


def segment(text: str, lang: str) -> AnnotatedText:
    """``text`` cut into sentences of language ``lang`` (a code sentencex knows, or any other:
    it falls back), every line break and every run of edge whitespace in the gaps."""
    ranges: list[tuple[int, int]] = []
    for line in LINES.finditer(text):
        for start, end in _line_cuts(line.group(), lang):
            ranges.extend(_trimmed(text, line.start() + start, line.start() + end))
    return AnnotatedText(text, tuple(ranges))


def _line_cuts(line: str, lang: str) -> list[tuple[int, int]]:
    """The segmenter's sentences of one line, as ranges that cover it; the whole line where
    the segmenter's answer does not fit the line (it never should)."""
    from sentencex import get_sentence_boundaries

    whole = [(0, len(line))]
    try:
        found = get_sentence_boundaries(lang, line)
    except Exception:  # a segmenter failure must not lose the text: keep the line whole
        return whole
    cuts, last = [], 0
    for item in found:
        end = item.get("end_index") if isinstance(item, dict) else None
        if not isinstance(end, int) or not last < end <= len(line):
            return whole
        cuts.append((last, end))
        last = end
    if last != len(line):
        cuts.append((last, len(line)))
    return cuts


def _trimmed(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """``text[start:end]`` without gap characters at its edges; nothing if only those."""
    while start < end and is_gap(text[start]):
        start += 1
    while end > start and is_gap(text[end - 1]):
        end -= 1
    if start < end:
        yield start, end


# ---------------------------------------------------------------------------------------------
# Sentences too long for a model


def cut_long(sentence: str, pieces: Callable[[str], int], limit: int) -> list[str]:
    """``sentence`` in parts of at most ``limit`` pieces each (``pieces`` counts them), in
    order, cut at a safe point: after the last ``;`` or else ``,`` of the stretch that fits
    (when it lies in its second half), else at the whitespace nearest the limit, else (a run
    of text with no space, such as a URL or CJK text) where the limit falls. Only the
    whitespace at the cuts is lost; a sentence that fits is one part."""
    parts, rest = [], sentence
    while rest:
        count = pieces(rest)
        if count <= limit:
            parts.append(rest)
            break
        size = len(rest)
        while True:  # shrink the stretch until it fits (the estimate is per character)
            size = max(1, min(size - 1, int(size * limit / max(count, 1))))
            cut = _safe_cut(rest, size)
            count = pieces(rest[:cut].rstrip())
            if count <= limit or size == 1:
                break
        head, rest = rest[:cut].rstrip(), rest[cut:].lstrip()
        parts.extend([head] if head else [])
    return parts


def _safe_cut(text: str, size: int) -> int:
    """Where to cut ``text`` so that its head has at most ``size`` characters (at least 1)."""
    stretch = text[: size + 1]  # a space just past the limit is still a cut within it
    for mark in (";", ","):
        at = stretch.rfind(mark, 0, size)
        if at >= size // 2:
            return at + 1
    space = max((i for i in range(len(stretch) - 1, 0, -1) if stretch[i].isspace()), default=0)
    return space if space > 0 else size
