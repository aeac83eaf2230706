"""Finding the spans that must not be translated (URLs, e-mail addresses, numbers, @mentions,
#hashtags, emoji, inline `code`); :mod:`mtkit.text.span_masking` masks and restores them.

Finding (:func:`find_spans`): one pattern per kind, taken in the order of :data:`KINDS`, a match
that overlaps one taken before dropped: a URL's ``#fragment`` is no hashtag, ``@user@host.social``
one mention and no e-mail, a number inside another span no number. A URL starts with a scheme
(``http(s)://``, ``ftp://``, ``mailto:``) or ``www.`` and ends before trailing punctuation (a
closing bracket it opened stays). A number stands alone (``5th``, ``mp3``, ``COVID-19`` are
words): digits in groups of ``.``, ``,``, ``:`` (1,000.5, 1.000,5, 10:30), ranges and dates
(10-20, 2024-01-15, 1/2), with a sign, currency symbol or ``%`` attached. A hashtag has a letter
(``#1`` is ``#`` and a number). Emoji are grapheme clusters (ZWJ sequences, skin tones, flags,
keycaps), one span per run of them; symbols shown as text (© ™ ↔, ❤ without U+FE0F) are none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import regex

KINDS = ("code", "url", "mention", "email", "hashtag", "emoji", "number")  # the order taken

_NAME = r"[\p{L}\p{M}\p{N}_]"  # a character of a name, a hashtag, a domain label
_DOMAIN = r"[\p{L}\p{M}\p{N}_-]+(?:\.[\p{L}\p{M}\p{N}_-]+)+"
_EMOJI = (
    r"(?:\p{Emoji_Presentation}|\p{Regional_Indicator}|[#*0-9]\uFE0F?\u20E3"
    r"|\p{Extended_Pictographic}(?=[\uFE0F\u200D\U0001F3FB-\U0001F3FF]))"
)
_URL = r"(?<![\p{L}\p{N}_@./-])((?:https?|ftp)://|mailto:|www\.)[^\s<>\"`]+"
_MENTION = (
    rf"(?<![\p{{L}}\p{{N}}_@./+-])@{_NAME}(?:[\p{{L}}\p{{M}}\p{{N}}_.]*{_NAME})?"
    rf"(?:@{_DOMAIN})?"
)
_NUMBER = (
    r"(?<![\p{L}\p{N}_.,:/@+\-−\p{Sc}])\p{Sc}?[+\-−]?(?>\d+(?:[.,:]\d+)*"
    r"(?:[-–/]\d+(?:[.,:]\d+)*)*)(?:[%‰]|\p{Sc})?(?![\p{L}\p{M}\p{N}_])"
)
_PATTERNS = {
    "code": regex.compile(r"(?<!`)(`+)[^`\n]+\1(?!`)"),
    "url": regex.compile(_URL, regex.IGNORECASE),
    "mention": regex.compile(_MENTION),
    "email": regex.compile(r"(?<![\p{L}\p{N}_.+-])[\p{L}\p{M}\p{N}_.+-]+@" + _DOMAIN),
    "hashtag": regex.compile(rf"(?<![\p{{L}}\p{{N}}_&#/])#(?={_NAME}*\p{{L}}){_NAME}+"),
    "emoji": regex.compile(rf"(?:(?={_EMOJI})\X)+"),
    "number": regex.compile(_NUMBER),
}
_HINT = re.compile(r"[`@#\d]|://|www\.|[^\x00-\x7f]", re.IGNORECASE)  # none: no span, no search
_URL_END = ".,;:!?'\"»«”’)]}>*"
_OPENS = {")": "(", "]": "[", "}": "{"}
WORDCHAR = regex.compile(r"[\p{L}\p{M}\p{N}_]")


@dataclass(frozen=True, order=True)
class Span:
    """``text[start:end]`` is a span of ``kind`` (one of :data:`KINDS`)."""

    start: int
    end: int
    kind: str


def find_spans(text: str) -> list[Span]:
    """The spans of ``text``: sorted, not overlapping (the module docstring has the rules)."""
    if not _HINT.search(text):
        return []
    taken = bytearray(len(text))
    spans = []
    for kind in KINDS:
        for start, end in _matches(kind, text):
            if taken.find(1, start, end) < 0:
                taken[start:end] = b"\x01" * (end - start)
                spans.append(Span(start, end, kind))
    return sorted(spans)


def _matches(kind: str, text: str) -> list[tuple[int, int]]:
    found = [m.span() for m in _PATTERNS[kind].finditer(text)]
    if kind != "url":
        return found
    urls = []
    for start, end in found:
        while end > start and (c := text[end - 1]) in _URL_END:
            if c in _OPENS and text.count(_OPENS[c], start, end) >= text.count(c, start, end):
                break
            end -= 1
        if WORDCHAR.search(text, _PATTERNS["url"].match(text, start).end(1), end):  # not bare
            urls.append((start, end))
    return urls
