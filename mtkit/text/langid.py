"""Language identification: which language a text is in, and whether a model translates it.

The identifier is py3langid (a maintained fork of langid.py: Lui and Baldwin, 2012, a naive
Bayes classifier over byte n-grams), whose model ships inside the package (no download at run
time) and knows 139 languages; why it and not lingua-language-detector, with the measurements
(99-100 % of Multi30k's captions in each of en, de, fr, cs; 16 times faster than lingua, a tenth
of its memory): benchmarks/README.md, "Language identification". Candidates are chosen after
scoring every language: the softmax is taken over the candidates' scores alone (what
py3langid's ``set_languages`` computes, without changing shared state, and without the float32
underflow of renormalising probabilities taken over all languages).

What is identified. Spans that belong to no language (URLs, e-mail addresses, numbers,
@mentions, #hashtags, emoji, inline code: :func:`mtkit.text.span_finding.find_spans`) are removed
first, and only the first :data:`MAX_CHARS` characters of what is left are read (accuracy
saturates long before; a 20,000-character text would take 30 ms). A text with no letter left
(empty, emoji, digits, a URL) is in no language: :func:`identify` answers ``[]``. Of an HTML
document only the text that would be translated counts (:func:`plain_text`: no tags, no
attributes, no ``script``, ``code`` or ``translate="no"``).

Confidence is py3langid's probability (softmax over languages at temperature sqrt(bytes), so
that it is calibrated across lengths) times 100, rounded to 0.1: a caption is usually 98-99.9,
"Merci beaucoup" fr 47.8 and en 4.3. ``zxx`` (py3langid's "no linguistic content") is left out.

Whether a model translates a text (:func:`source_language`, what ``"source": "auto"`` of
`mtkit serve` asks). A short text is often taken for another language ("Hallo" for Italian,
"lol" for Sesotho), so the model's source language is refused only when both hold: the text has
at least :data:`MIN_LETTERS` letters (outside spans), and the identifier finds another language
more than 1 / :data:`ODDS` = 20 times as likely as the source. Measured over the four test sets
(``bench_langid.py``, each language as the model's source in turn): the captions of the three
other languages are refused 99.9-100 % of the time, and the first 1, 2, 3 or 5 words of the
source language's own captions are refused 0.0-0.2 % of the time (the rule "any other language
first" refuses 48-93 % of one-word and 3-4 % of five-word prefixes). A text taken for the source
this way answers the source with its own (low) confidence; a text with no letter answers the
source with confidence 0, as LibreTranslate answers English with 0 for untranslatable text.
"""

from __future__ import annotations

import math
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import regex

from mtkit.errors import MtkitError
from mtkit.text.span_finding import find_spans

MAX_CHARS = 2000  # characters of a text (spans removed) that are read
MIN_LETTERS = 10  # a text with fewer letters is never refused as another language
ODDS = 0.05  # the source is refused when another language is more than 1/ODDS times as likely
NO_LANGUAGE = "zxx"  # py3langid's label for text with no linguistic content

_LETTER = regex.compile(r"\p{L}")
_LOCK = threading.Lock()
_IDENTIFIER: list[Any] = []  # the loaded py3langid identifier, once loaded


@dataclass(frozen=True)
class Guess:
    """A text's language for a model: ``language`` (a code), ``confidence`` (0-100) and
    whether the model translates from it (``accepted``)."""

    language: str
    confidence: float
    accepted: bool


def load() -> Any:
    """The py3langid identifier, loaded once (0.8 s: its model is xz-compressed); thread-safe,
    so that a server can load it in the background while requests wait for it."""
    with _LOCK:
        if not _IDENTIFIER:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            _IDENTIFIER.append(LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=False))
        return _IDENTIFIER[0]


def languages() -> frozenset[str]:
    """The codes the identifier knows: ISO 639-1 where a language has one, else ISO 639-3."""
    return frozenset(load().labels) - {NO_LANGUAGE}


def language_text(text: str) -> str:
    """``text`` without its spans (URLs, numbers, emoji, ...), cut to :data:`MAX_CHARS`.

    >>> language_text("see https://x.org/a at 10:30😀")
    'see   at   '
    """
    parts, at = [], 0
    for span in find_spans(text):
        parts.append(text[at : span.start])
        at = span.end
    parts.append(text[at:])
    return " ".join(parts)[:MAX_CHARS]


def letters(text: str) -> int:
    """How many letters ``text`` has."""
    return len(_LETTER.findall(text))


def identify(text: str, candidates: Sequence[str] | None = None) -> list[tuple[str, float]]:
    """Every language ``text`` may be in (of ``candidates``, or of all the identifier knows),
    best first, with its confidence (0-100, summing to about 100); ``[]`` for a text with no
    letter outside its spans.

    >>> identify("A man in a red shirt is riding a bike down the street.")[:2]
    [('en', 99.3), ('pcm', 0.4)]
    >>> identify("Merci beaucoup", ["en", "de"])
    [('en', 84.2), ('de', 15.8)]
    """
    return [(code, round(p * 100, 1)) for code, p in _probabilities(text, candidates)]


def _probabilities(text: str, candidates: Sequence[str] | None) -> list[tuple[str, float]]:
    """Languages and their probabilities (0-1), best first, of ``candidates`` if given: the
    softmax of py3langid's scores at its temperature, over the languages asked for (so that a
    candidate's probability does not underflow to 0 when another language wins)."""
    identifier = load()
    if candidates is not None:
        unknown = sorted(set(candidates) - languages())
        if unknown:
            raise MtkitError(
                f"language identification: unknown language code(s) {', '.join(unknown)}"
            )
    plain = language_text(text)
    if not letters(plain):
        return []
    wanted = set(candidates) if candidates is not None else languages()
    scores = [(code, score) for code, score in identifier.rank(plain) if code in wanted]
    size = len(unicodedata.normalize("NFC", plain).encode("utf-8", "surrogatepass"))
    top, temperature = scores[0][1], math.sqrt(size)
    weights = [math.exp((score - top) / temperature) for _, score in scores]
    total = sum(weights)
    return [(code, weight / total) for (code, _), weight in zip(scores, weights, strict=True)]


def plain_text(text: str, format: str = "text") -> str:
    """What a text says: itself, or for ``format`` "html" (or "xml") the words that would be
    translated, one segment a line (:func:`mtkit.text.markup.find_runs`)."""
    if format == "text":
        return text
    from mtkit.text.markup import find_runs, parse

    return "\n".join(run.text for run in find_runs(parse(text, format, 1)))


def source_language(text: str, sources: Sequence[str], format: str = "text") -> Guess:
    """The language of ``text`` for a model that translates from ``sources`` (codes, best
    first): one of them unless the text plainly is in another language (the rule is in the
    module's docstring). A text with no letter, or sources the identifier does not know, give
    ``sources[0]`` with confidence 0.

    >>> source_language("Une femme en robe rouge marche dans la rue.", ["en"])
    Guess(language='fr', confidence=98.3, accepted=False)
    >>> source_language("Danke!", ["en"])
    Guess(language='en', confidence=1.2, accepted=True)
    """
    known = [code for code in sources if code in languages()]
    plain = language_text(plain_text(text, format))
    ranked = _probabilities(plain, None) if known else []
    if not ranked:
        return Guess(sources[0], 0.0, True)
    probability = dict(ranked)
    source = max(known, key=lambda code: probability[code])
    if letters(plain) < MIN_LETTERS or probability[source] >= ODDS * ranked[0][1]:
        return Guess(source, round(probability[source] * 100, 1), True)
    return Guess(ranked[0][0], round(ranked[0][1] * 100, 1), False)
