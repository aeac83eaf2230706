"""SubRip subtitles (``.srt``): every cue's text translated, its number and timings kept byte
for byte.

The file must be UTF-8 text (:func:`~mtkit.text.files.plain.decode_text`) that the ``srt``
package parses (its parser is strict about what lies between cues: garbage is refused). Cues are
then found with that parser's own pattern (``srt.SRT_REGEX``, group 5 is a cue's text), and
only those stretches are replaced: numbers, timings, coordinates, blank lines, line endings
and a byte-order mark stay as they were.

A cue's text is one text: its lines joined with spaces (a sentence often runs over two lines),
translated (cut into sentences by the text layer), and wrapped again into as many lines as it
had, at spaces, the longest line as short as it can be. Two exceptions:

- a dialogue cue (two lines or more, each starting with ``-``) is one text per line, each
  keeping its dash;
- formatting at a cue's (a dialogue line's) edges is kept and not translated: leading and
  trailing tags (``<i>``, ``</i>``, ``<font color="..">``) and ASS overrides (``{\\an8}``).
  Tags inside the text go through as text.

Example: ``<i>I went to the\\nstore yesterday.</i>`` is the text ``I went to the store
yesterday.``, its translation wrapped into two lines inside ``<i>`` and ``</i>``.
"""

from __future__ import annotations

import re

from mtkit.data.tokenizer import Tokenizer
from mtkit.text.files import FileError, ZipLimits
from mtkit.text.files.plain import decode_text
from mtkit.text.translate import TextOptions, Units, translate_documents

TAG = r"<[^<>\n]*>|\{\\[^{}\n]*\}"  # an HTML-like tag, an ASS override
LEAD = re.compile(rf"(?:\s|{TAG})*")
TAG_ONLY = re.compile(TAG)
DASH = re.compile(rf"(?:\s|{TAG})*-+\s*")
CONTENT = 5  # srt.SRT_REGEX's group of a cue's text


def translate(
    data: bytes,
    options: TextOptions,
    tokenizer: Tokenizer,
    limit: int,
    units: Units,
    limits: ZipLimits,
) -> bytes:
    """A SubRip file with every cue's text translated."""
    return translate_srt(decode_text(data), options, tokenizer, limit, units).encode("utf-8")


def translate_srt(
    text: str, options: TextOptions, tokenizer: Tokenizer, limit: int, units: Units
) -> str:
    """SubRip ``text`` with every cue's text translated, all else kept."""
    import srt

    try:
        for _ in srt.parse(text):  # the check: raises on what is not SubRip
            pass
    except (srt.SRTParseError, ValueError) as err:
        raise FileError(f"not SubRip subtitles: {_first_line(err)}") from None
    spans = [match.span(CONTENT) for match in srt.SRT_REGEX.finditer(text)]
    cues = [Cue.read(text[start:end]) for start, end in spans]
    texts = [t for cue in cues for t in cue.texts]
    found = iter(translate_documents(texts, options, tokenizer, limit, units))
    out, at = [], 0
    for cue, (start, end) in zip(cues, spans, strict=True):
        out += [text[at:start], cue.write([next(found).text for _ in cue.texts])]
        at = end
    return "".join(out) + text[at:]


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:200]


class Cue:
    """A cue's text: the texts to translate, and what is kept around them."""

    def __init__(self, eol: str, lines: int, edges: list[tuple[str, str]], texts: list[str]):
        self.eol, self.lines, self.edges, self.texts = eol, lines, edges, texts

    @classmethod
    def read(cls, content: str) -> Cue:
        eol = "\r\n" if "\r\n" in content else "\n"
        lines = [line for line in content.replace("\r\n", "\n").split("\n") if line.strip()]
        if len(lines) > 1 and all(DASH.match(line) for line in lines):  # dialogue
            edges, texts = zip(*(_edges(line, dash=True) for line in lines), strict=True)
            return cls(eol, 1, list(edges), list(texts))
        edge, body = _edges(content, dash=False)
        return cls(eol, max(len(lines), 1), [edge], [body] if body else [])

    def write(self, translations: list[str]) -> str:
        """The cue's text with ``translations`` (one per text) in place."""
        if len(self.edges) > 1:
            pairs = zip(self.edges, translations, strict=True)
            return self.eol.join(lead + t + trail for (lead, trail), t in pairs)
        (lead, trail), body = self.edges[0], translations[0] if translations else ""
        return lead + self.eol.join(wrap(body, self.lines)) + trail


def _edges(text: str, dash: bool) -> tuple[tuple[str, str], str]:
    """((what comes before the words, what comes after), the words joined with spaces)."""
    lead = (DASH if dash else LEAD).match(text)
    start = lead.end() if lead else 0
    end = len(text)
    while end > start:  # trailing whitespace and tags, from the end (linear time)
        if text[end - 1].isspace():
            end -= 1
            continue
        opening = {">": "<", "}": "{"}.get(text[end - 1])
        at = text.rfind(opening, start, end) if opening else -1
        if at < 0 or not TAG_ONLY.fullmatch(text, at, end):
            break
        end = at
    return (text[:start], text[end:]), " ".join(text[start:end].split())


def wrap(text: str, lines: int) -> list[str]:
    """``text``'s words in at most ``lines`` lines, the longest as short as can be: the
    narrowest width at which filling lines in turn needs no more (a binary search).

    >>> wrap("HELLO THERE FRIEND", 2)
    ['HELLO THERE', 'FRIEND']
    """
    words = text.split()
    if not words:
        return []
    low, high = max(map(len, words)), len(" ".join(words))
    while low < high:
        mid = (low + high) // 2
        if len(_filled(words, mid)) <= lines:
            high = mid
        else:
            low = mid + 1
    return [" ".join(line) for line in _filled(words, low)]


def _filled(words: list[str], width: int) -> list[list[str]]:
    """``words`` in lines of at most ``width`` characters, each line filled before the next."""
    out, size = [[words[0]]], len(words[0])
    for word in words[1:]:
        if size + 1 + len(word) <= width:
            out[-1].append(word)
            size += 1 + len(word)
        else:
            out.append([word])
            size = len(word)
    return out
