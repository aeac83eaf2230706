"""The text plan: texts cut into the units an engine translates, and the units' translations
put back into the texts.

:func:`plan` takes off a text's leading ``>>xx<<`` tag (a multilingual model's target: it then
applies to every sentence), cuts the text into sentences (:func:`~mtkit.text.segment.segment`;
without ``split`` each of its lines is one sentence, as it is), masks each sentence's
untranslatable spans (:mod:`mtkit.text.span_masking`) and cuts a masked sentence longer than
the engine's limit into parts (:func:`~mtkit.text.segment.cut_long`, one warning per such
sentence, naming its line). What it gives back are :class:`~mtkit.text.annotated.AnnotatedText`
holding all of that; their units, over all texts (:func:`unit_lines`), are what an engine
translates, in one call. :func:`put_back` puts the units' translations back: a cut sentence's
parts joined with a space, its spans restored, the sentences into the original gaps, the word
alignments (:mod:`mtkit.text.aligned`) and confidence (:mod:`mtkit.text.confidence`) carried
along.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from mtkit.config import TEXT_FORMATS
from mtkit.data.sentence_style import SentenceStyle
from mtkit.data.source_words import SourceWords
from mtkit.data.tags import split_tag
from mtkit.data.tokenizer import Tokenizer
from mtkit.decoding.guard import TITLE, UPPER, case_pattern
from mtkit.engines.alignment import Alignment
from mtkit.engines.base import Translation, one_line, warn
from mtkit.engines.confidence import Confidence
from mtkit.engines.guard import joined_ways
from mtkit.errors import MtkitError
from mtkit.text.aligned import Part, joined, located
from mtkit.text.annotated import AnnotatedText
from mtkit.text.confidence import joined_confidence, regrouped
from mtkit.text.segment import Counter, cut_long, part_limit, segment
from mtkit.text.sentence_ends import closed
from mtkit.text.span_masking import mask
from mtkit.text.spelling import corrected


@dataclass(frozen=True)
class TextOptions:
    """How texts are read: their language (the segmenter's rules), whether they are cut into
    sentences, whether untranslatable spans are kept verbatim, and their format."""

    lang: str = "en"
    split: bool = True  # False: each line of a text is one sentence, translated as it is
    spans: bool = True  # URLs, e-mails, numbers, mentions, hashtags, emoji, code kept verbatim
    format: str = "text"  # text | html | xml
    # without split: a line longer than the unit limit but of at most this many pieces is cut
    # into parts at the limit (the model's trained length); longer ones, and all with 0, stay
    # whole (the engine truncates them, as --max-input-tokens says)
    cut: int = 0
    # a sentence longer than the unit limit that marks no sentence end inside is cut into
    # parts of at most this many pieces where fewer (the training sources' typical length,
    # SentenceStyle.length: mtkit.text.segment.part_limit); 0: parts at the limit
    part: int = 0
    # how the model's training sentences start and end: sentences run on into one are cut
    # where one of its openers starts the next, and one without a final mark is translated
    # with the data's (mtkit.text.sentence_ends); empty: texts are read as they are
    style: SentenceStyle = SentenceStyle()
    # the words the model was trained on: a word one edit from them is corrected
    # (mtkit.text.spelling), but never one of ``keep`` (lowercased: a glossary's source words)
    words: SourceWords = SourceWords()
    keep: frozenset[str] = frozenset()
    # ALL CAPS and Title Case sentences are translated lowercased (the decoding guard:
    # mtkit.engines.guard), so their length is that of the lowercased text
    lowered: bool = False

    def __post_init__(self) -> None:
        if self.format not in TEXT_FORMATS:
            raise MtkitError(
                f"format must be one of {', '.join(TEXT_FORMATS)}, got {self.format!r}"
            )

    def engine_line(self, unit: str, ends_sentence: bool) -> str:
        """``unit`` as the engine reads it: its typos corrected, and where it ends its
        sentence, closed with the style's final mark (:mod:`mtkit.text.sentence_ends`)."""
        text = corrected(unit, self.words, self.keep)
        return closed(text, self.style.final) if ends_sentence else text

    @property
    def needs_alignment(self) -> bool:
        """Markup is carried by the word alignments: the engine must give them."""
        return self.format != "text"


@dataclass(frozen=True)
class TextTranslation:
    """A text's translation, and its word alignment (Moses pairs over the text's and the
    translation's whitespace words; None unless asked for, or where the engine gives none)
    and confidence (over all its units' pieces and per whitespace word of ``text``:
    :mod:`mtkit.text.confidence`; None unless asked for); ``guard``: how the decoding guard
    translated its units whose translation degenerated (:mod:`mtkit.engines.guard`), each
    way once, in order, joined with commas (``lowercased,squeezed``); None where it did not.
    ``alternatives``: the text built from each unit's next-best hypotheses, rank 2 first."""

    text: str
    alignment: Alignment | None = None
    confidence: Confidence | None = None
    guard: str | None = None
    alternatives: tuple[str, ...] = ()


def _parts(
    sentence: str, count: Counter, limit: int, options: TextOptions, openers: frozenset[str]
) -> list[str]:
    """A unit longer than ``limit`` pieces in parts, each translated: its own sentences (as
    :func:`~mtkit.text.segment.segment` cuts them: a sentence-level model translates one
    at a time), each longer one cut again (:func:`~mtkit.text.segment.cut_long`, at the
    typical length where it marks no sentence end: :func:`~mtkit.text.segment.part_limit`;
    where the style's edges say sentences most likely end). An ALL CAPS or Title Case one is
    measured lowercased, as the guard translates it (``options.lowered``; its capitals open no
    sentence), else cut at ``limit`` as it is. ``openers``: the style's."""
    edges = options.style.edges
    if case_pattern(sentence) in (UPPER, TITLE):
        if not options.lowered:
            return cut_long(sentence, count, limit, openers, edges)
        count = _lowered(count)
    inner = segment(sentence, options.lang, openers, edges).all_sentences()
    return [
        part
        for text, size in zip(inner, count(inner), strict=True)
        for part in (
            [text]
            if size <= limit
            else cut_long(text, count, part_limit(text, limit, options.part), openers, edges)
        )
    ]


def _lowered(count: Counter) -> Counter:
    """``count`` of texts lowercased (what the guard translates of an ALL CAPS text)."""
    return lambda texts: count([text.lower() for text in texts])


def plan(
    texts: Sequence[str],
    options: TextOptions,
    tokenizer: Tokenizer,
    limit: int,
    first_number: int = 1,
) -> list[AnnotatedText]:
    """``texts`` cut into units of at most ``limit`` source pieces: with ``options.split``
    sentences, else each line one unit, as it is; a unit longer than ``limit`` (the engine's
    cut: what the model was trained on, or its positions) in parts, each translated.
    ``first_number`` numbers the texts in warnings (a text is a line of the input)."""
    tagged = [_tagged(text, tokenizer.tags) for text in texts]
    openers = frozenset(options.style.openers)
    annotated = [
        segment(body, options.lang, openers, options.style.edges) if options.split else _lines(body)
        for _, body in tagged
    ]
    plain = [s for text in annotated for s in text.all_sentences()]
    masks = [mask(s) if options.spans else None for s in plain]
    sentences = [m.text if m else s for m, s in zip(masks, plain, strict=True)]
    lengths = iter(len(ids) for ids in tokenizer.encode([_read(s, options) for s in sentences]))

    def count(texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in tokenizer.encode(texts)] if texts else []

    out, at = [], 0
    for number, ((tag, _), text) in enumerate(zip(tagged, annotated, strict=True), first_number):
        units = []
        for sentence in sentences[at : at + len(text)]:
            size = next(lengths)
            whole = not options.split and size > options.cut  # the engine truncates it
            cut = (
                [sentence]
                if size <= limit or whole
                else _parts(sentence, count, limit, options, openers)
            )
            if len(cut) > 1:
                warn(
                    f"line {number}: a sentence of {size} pieces, more than "
                    f"the limit of {limit}, cut into {len(cut)} parts, each translated"
                )
            units.append(tuple(zip(cut, located(sentence, cut), strict=True)))
        masked = tuple(masks[at : at + len(text)])
        out.append(replace(text, tag=tag, masked=masked, units=tuple(units)))
        at += len(text)
    return out


def _read(sentence: str, options: TextOptions) -> str:
    """``sentence`` as the engine's search reads it: lowercased where ALL CAPS or Title Case
    and ``options.lowered``."""
    return (
        sentence.lower()
        if options.lowered and case_pattern(sentence) in (UPPER, TITLE)
        else sentence
    )


def _tagged(text: str, known: Sequence[str]) -> tuple[str, str]:
    """(a multilingual model's leading tag, the text without it and the space after it)."""
    code, rest = split_tag(text.lstrip())
    if not known or not code:
        return "", text
    return code, rest.lstrip(" \t")


def _lines(text: str) -> AnnotatedText:
    """A text whose every line is one sentence, as it is (a ``\\r`` before a line's ``\\n`` left
    in the gap; an empty line has none)."""
    sentences, start = [], 0
    lines = text.split("\n")
    for i, line in enumerate(lines):
        end = start + len(line.removesuffix("\r") if i < len(lines) - 1 else line)
        if end > start:
            sentences.append((start, end))
        start += len(line) + 1
    return AnnotatedText(text, tuple(sentences))


def unit_lines(texts: Sequence[AnnotatedText], options: TextOptions) -> list[str]:
    """What an engine translates: every unit of every text as the engine reads it
    (:meth:`TextOptions.engine_line`), each with its text's tag."""
    return [
        tagged(options.engine_line(unit, k == len(units) - 1), text.tag)
        for text in texts
        for units in text.units
        for k, (unit, _) in enumerate(units)
    ]


def tagged(unit: str, tag: str) -> str:
    """A unit as an engine reads it: after its text's tag, if it has one."""
    return f"{tag} {unit}" if tag else unit


def owners(texts: Sequence[AnnotatedText]) -> list[int]:
    """Each unit's text (its index)."""
    return [t for t, text in enumerate(texts) for _ in text.all_units()]


def put_back(
    texts: Sequence[AnnotatedText],
    results: Sequence[Sequence[Translation]],
    rank: int = 0,
    scores: bool = False,
) -> list[TextTranslation]:
    """Each planned text with its sentences translated (hypothesis ``rank`` of each unit, its
    best where it has fewer; "" for a unit with nothing to translate; a sentence of one unit
    exactly as the engine gave it), the gaps as they were, and the word alignment of the
    whole text (None unless every unit's hypothesis has one); with ``scores`` its confidence
    (every unit's hypothesis must have one)."""
    count = sum(len(text.all_units()) for text in texts)
    if len(results) != count:
        raise ValueError(f"{len(results)} results for {count} units")
    out, at = [], 0
    for text in texts:
        first, sentences, scored = at, [], []
        for sentence, masked, units in zip(
            text.all_sentences(), text.masked, text.units, strict=True
        ):
            found_units = results[at : at + len(units)]
            at += len(units)
            parts = [
                _part(unit, offset, hyps, rank)
                for (unit, offset), hyps in zip(units, found_units, strict=True)
            ]
            found = _sentence(masked.text if masked else sentence, parts)
            sentences.append(masked.restore(*found) if masked else found)
            if scores:
                confidence = _sentence_confidence(parts, found_units, rank)
                scored.append(
                    regrouped(confidence, masked.word_sources(*found)) if masked else confidence
                )
        gaps = [text.gap(i) for i in range(len(text) + 1)]
        whole = [
            Part(text.sentence(i), start, *sentences[i])
            for i, (start, _) in enumerate(text.sentences)
        ]
        found = joined(text.text, whole, gaps)
        confidence = None
        if scores:
            parts = [(p.translation, c) for p, c in zip(whole, scored, strict=True)]
            confidence = joined_confidence(parts, gaps)
        own = results[first:at]
        guard = joined_ways(hyps[min(rank, len(hyps) - 1)].guard for hyps in own if hyps)
        out.append(TextTranslation(*found, confidence, guard))
    return out


def _part(unit: str, offset: int, hyps: Sequence[Translation], rank: int) -> Part:
    """A unit and its hypothesis of ``rank`` (an empty translation where it has none)."""
    if not hyps:
        return Part(unit, offset, "", ())
    hyp = hyps[min(rank, len(hyps) - 1)]
    return Part(unit, offset, one_line(hyp.text), hyp.alignment)


def _unit_confidence(hyps: Sequence[Translation], rank: int) -> Confidence:
    """The confidence of a unit's hypothesis of ``rank`` (none for nothing to translate)."""
    if not hyps:
        return Confidence()
    found = hyps[min(rank, len(hyps) - 1)].confidence
    if found is None:
        raise MtkitError("scores were asked for, but the engine gave none")
    return found


def _sentence_confidence(
    parts: list[Part], results: Sequence[Sequence[Translation]], rank: int
) -> Confidence:
    """A sentence's confidence, as :func:`_sentence` joins its units."""
    found = [_unit_confidence(hyps, rank) for hyps in results]
    if len(parts) == 1:
        return found[0]
    kept = [
        (p.translation.strip(), c)
        for p, c in zip(parts, found, strict=True)
        if p.translation.strip()
    ]
    dropped = [c for p, c in zip(parts, found, strict=True) if not p.translation.strip()]
    glue = ["", *[" "] * (len(kept) - 1), ""] if kept else [""]
    return joined_confidence(kept, glue, dropped)


def _sentence(sentence: str, parts: list[Part]) -> tuple[str, Alignment | None]:
    """A sentence's translation: one unit's exactly, or its parts' joined with a space."""
    if len(parts) == 1:
        return parts[0].translation, parts[0].alignment
    kept = [replace(p, translation=p.translation.strip()) for p in parts if p.translation.strip()]
    if not kept:
        return "", None if any(p.alignment is None for p in parts) else ()
    return joined(sentence, kept, [""] + [" "] * (len(kept) - 1) + [""])
