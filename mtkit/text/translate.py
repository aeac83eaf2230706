"""Translate whole texts: segment, mask what must not be translated, translate every
sentence, restore, rebuild: the one text layer that `mtkit translate`, `mtkit serve` and the
library calls share, for every engine.

:func:`prepare` takes off a text's leading ``>>xx<<`` tag (a multilingual model's target: it
then applies to every sentence), cuts the text into sentences
(:func:`~mtkit.text.segment.segment`; or, without ``split``, takes it as one sentence, as it
is), masks each sentence's untranslatable spans (:mod:`mtkit.text.spans`) and cuts a masked
sentence longer than the engine's limit into parts (:func:`~mtkit.text.segment.cut_long`, one
warning per such sentence, naming its line). The parts of all texts are the *units*, the lines
an engine translates, all in one call (so batching across texts goes on as before). A
:class:`Segmented` puts the units' translations back: a cut sentence's parts joined with a
space, its spans restored, the sentences into the original gaps, the word alignments carried
along (:mod:`mtkit.text.aligned`). :func:`translate_documents` is the entry point: plain text,
or HTML/XML whose blocks come here as texts (:mod:`mtkit.text.markup`).

Who translates the units is the caller's: an engine (:func:`engine_units`) or the server's
cross-request batcher; the text layer sees only a function from lines to hypotheses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from mtkit.config import TEXT_FORMATS, SearchConfig
from mtkit.data.tags import split_tag
from mtkit.data.tokenizer import Tokenizer
from mtkit.engines.alignment import Alignment
from mtkit.engines.base import Engine, Progress, Translation, one_line, warn
from mtkit.engines.confidence import Confidence
from mtkit.engines.guard import joined_ways
from mtkit.errors import MtkitError
from mtkit.text.aligned import Piece, joined, located
from mtkit.text.annotated import AnnotatedText
from mtkit.text.confidence import joined_confidence, regrouped
from mtkit.text.glossary import Constrain
from mtkit.text.recut import merged, short_units
from mtkit.text.segment import cut_long, segment
from mtkit.text.spans import Masked, mask

# lines and each line's number in warnings (its text's) -> hypotheses (an engine, the batcher)
Units = Callable[[list[str], list[int]], list[list[Translation]]]


@dataclass
class Counted:
    """``units`` counting the lines they were given and the target tokens that came back."""

    units: Units
    lines: int = 0
    tokens: int = 0

    def __call__(self, lines: list[str], numbers: list[int]) -> list[list[Translation]]:
        results = self.units(lines, numbers)
        self.lines += len(lines)
        self.tokens += sum(hyps[0].tokens for hyps in results if hyps)
        return results


@dataclass(frozen=True)
class TextOptions:
    """How texts are read: their language (the segmenter's rules), whether they are cut into
    sentences, whether untranslatable spans are kept verbatim, and their format."""

    lang: str = "en"
    split: bool = True  # False: each text is one sentence, translated as it is
    spans: bool = True  # URLs, e-mails, numbers, mentions, hashtags, emoji, code kept verbatim
    format: str = "text"  # text | html | xml
    # without split: a text longer than the unit limit but of at most this many pieces is cut
    # into parts at the limit (the model's trained length); longer ones, and all with 0, stay
    # whole (the engine truncates them, as --max-input-tokens says)
    cut: int = 0

    def __post_init__(self) -> None:
        if self.format not in TEXT_FORMATS:
            raise MtkitError(
                f"format must be one of {', '.join(TEXT_FORMATS)}, got {self.format!r}"
            )

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
    way once, in order, joined with commas (``lowercased,squeezed``); None where it did not."""

    text: str
    alignment: Alignment | None = None
    confidence: Confidence | None = None
    guard: str | None = None


@dataclass
class Segmented:
    """Texts cut into ``units`` for an engine, and how to put their translations back."""

    texts: list[AnnotatedText]
    units: list[str]  # every sentence (or part of a long one) of every text, in order
    parts: list[list[int]]  # per text, per sentence: how many units it was cut into
    offsets: list[int] = field(default_factory=list)  # per unit: where it starts in its sentence
    masks: list[Masked | None] = field(default_factory=list)  # per sentence, all texts in order
    tags: list[str] = field(default_factory=list)  # per text: its leading >>xx<< tag, or ""

    def owners(self) -> list[int]:
        """Each unit's text (its index)."""
        return [t for t, size in enumerate(self.sizes()) for _ in range(size)]

    def lines(self, units: Sequence[str] | None = None, owners: Sequence[int] = ()) -> list[str]:
        """What an engine translates: the units (or ``units`` of texts ``owners``), each with
        its text's tag."""
        if units is None:
            units, owners = self.units, self.owners()
        if not any(self.tags):
            return list(units)
        return [
            f"{self.tags[t]} {unit}" if self.tags[t] else unit
            for unit, t in zip(units, owners, strict=True)
        ]

    def recut(self, results: Sequence[Sequence[Translation]]) -> dict[int, list[str]]:
        """Units whose translation covers too little (:mod:`mtkit.text.recut`), each with the
        two parts to translate instead."""
        return short_units(self.units, results, self.sizes())

    def again(self, parts: dict[int, list[str]]) -> tuple[list[str], list[int]]:
        """The lines that translate ``parts`` (tagged as their texts), and their texts."""
        owners = self.owners()
        texts = [owners[i] for i, pair in parts.items() for _ in pair]
        return self.lines([p for pair in parts.values() for p in pair], texts), texts

    def merged(
        self,
        results: Sequence[Sequence[Translation]],
        parts: dict[int, list[str]],
        again: Sequence[Sequence[Translation]],
    ) -> list[list[Translation]]:
        """``results`` with the units of ``parts`` replaced by their parts' translations."""
        return merged(self.units, results, parts, again)

    def sizes(self) -> list[int]:
        """How many units each text has."""
        return [sum(counts) for counts in self.parts]

    def translated(
        self, results: Sequence[Sequence[Translation]], rank: int = 0, scores: bool = False
    ) -> list[TextTranslation]:
        """Each text with its sentences translated (hypothesis ``rank`` of each unit, its best
        where it has fewer; "" for a unit with nothing to translate; a sentence of one unit
        exactly as the engine gave it), the gaps as they were, and the word alignment of the
        whole text (None unless every unit's hypothesis has one); with ``scores`` its
        confidence (every unit's hypothesis must have one)."""
        if len(results) != len(self.units):
            raise ValueError(f"{len(results)} results for {len(self.units)} units")
        offsets = self.offsets or [0] * len(self.units)
        masks = iter(self.masks or [None] * sum(len(counts) for counts in self.parts))
        out, at = [], 0
        for text, counts in zip(self.texts, self.parts, strict=True):
            sentences, scored = [], []
            for count, sentence in zip(counts, text.all_sentences(), strict=True):
                pieces = [
                    _piece(self.units[u], offsets[u], results[u], rank)
                    for u in range(at, at + count)
                ]
                units = range(at, at + count)
                at += count
                masked = next(masks)
                found = _sentence(masked.text if masked else sentence, pieces)
                sentences.append(masked.restore(*found) if masked else found)
                if scores:
                    confidence = _sentence_confidence(pieces, [results[u] for u in units], rank)
                    scored.append(
                        regrouped(confidence, masked.word_sources(*found)) if masked else confidence
                    )
            gaps = [text.gap(i) for i in range(len(text) + 1)]
            whole = [
                Piece(text.sentence(i), start, *sentences[i])
                for i, (start, _) in enumerate(text.sentences)
            ]
            found = joined(text.text, whole, gaps)
            confidence = None
            if scores:
                parts = [(p.translation, c) for p, c in zip(whole, scored, strict=True)]
                confidence = joined_confidence(parts, gaps)
            units = [results[u] for u in range(at - sum(counts), at)]
            guard = joined_ways(hyps[min(rank, len(hyps) - 1)].guard for hyps in units if hyps)
            out.append(TextTranslation(*found, confidence, guard))
        return out


def _piece(unit: str, offset: int, hyps: Sequence[Translation], rank: int) -> Piece:
    """A unit and its hypothesis of ``rank`` (an empty translation where it has none)."""
    if not hyps:
        return Piece(unit, offset, "", ())
    hyp = hyps[min(rank, len(hyps) - 1)]
    return Piece(unit, offset, one_line(hyp.text), hyp.alignment)


def _unit_confidence(hyps: Sequence[Translation], rank: int) -> Confidence:
    """The confidence of a unit's hypothesis of ``rank`` (none for nothing to translate)."""
    if not hyps:
        return Confidence()
    found = hyps[min(rank, len(hyps) - 1)].confidence
    if found is None:
        raise MtkitError("scores were asked for, but the engine gave none")
    return found


def _sentence_confidence(
    pieces: list[Piece], results: list[Sequence[Translation]], rank: int
) -> Confidence:
    """A sentence's confidence, as :func:`_sentence` joins its units."""
    found = [_unit_confidence(hyps, rank) for hyps in results]
    if len(pieces) == 1:
        return found[0]
    kept = [
        (p.translation.strip(), c)
        for p, c in zip(pieces, found, strict=True)
        if p.translation.strip()
    ]
    dropped = [c for p, c in zip(pieces, found, strict=True) if not p.translation.strip()]
    glue = ["", *[" "] * (len(kept) - 1), ""] if kept else [""]
    return joined_confidence(kept, glue, dropped)


def _sentence(sentence: str, pieces: list[Piece]) -> tuple[str, Alignment | None]:
    """A sentence's translation: one unit's exactly, or its parts' joined with a space."""
    if len(pieces) == 1:
        return pieces[0].translation, pieces[0].alignment
    kept = [replace(p, translation=p.translation.strip()) for p in pieces if p.translation.strip()]
    if not kept:
        return "", None if any(p.alignment is None for p in pieces) else ()
    return joined(sentence, kept, [""] + [" "] * (len(kept) - 1) + [""])


def prepare(
    texts: Sequence[str],
    options: TextOptions,
    tokenizer: Tokenizer,
    limit: int,
    first_number: int = 1,
) -> Segmented:
    """``texts`` cut into units of at most ``limit`` source pieces: with ``options.split``
    sentences, else each text one unit, as it is; a unit longer than ``limit`` (the engine's
    cut: what the model was trained on, or its positions) in parts, each translated.
    ``first_number`` numbers the texts in warnings (a text is a line of the input)."""
    tagged = [_tagged(text, tokenizer.tags) for text in texts]
    annotated = [
        segment(body, options.lang) if options.split else _whole(body) for _, body in tagged
    ]
    plain = [s for text in annotated for s in text.all_sentences()]
    masks = [mask(s) if options.spans else None for s in plain]
    sentences = [m.text if m else s for m, s in zip(masks, plain, strict=True)]
    lengths = iter(len(ids) for ids in tokenizer.encode(sentences))
    units: list[str] = []
    parts: list[list[int]] = []
    offsets: list[int] = []

    def count(texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in tokenizer.encode(texts)] if texts else []

    def pieces(text: str) -> int:
        return count([text])[0]

    at = iter(sentences)
    for number, text in enumerate(annotated, start=first_number):
        counts = []
        for _ in range(len(text)):
            sentence = next(at)
            size = next(lengths)
            whole = not options.split and size > options.cut  # the engine truncates it
            fits = size <= limit or whole
            cut = [sentence] if fits else cut_long(sentence, count, limit)
            if len(cut) > 1:
                warn(
                    f"line {number}: a sentence of {pieces(sentence)} pieces, more than the "
                    f"limit of {limit}, cut into {len(cut)} parts, each translated"
                )
            units.extend(cut)
            offsets.extend(located(sentence, cut))
            counts.append(len(cut))
        parts.append(counts)
    return Segmented(annotated, units, parts, offsets, masks, [tag for tag, _ in tagged])


def _tagged(text: str, known: Sequence[str]) -> tuple[str, str]:
    """(a multilingual model's leading tag, the text without it and the space after it)."""
    code, rest = split_tag(text.lstrip())
    if not known or not code:
        return "", text
    return code, rest.lstrip(" \t")


def _whole(text: str) -> AnnotatedText:
    """A text as one sentence, as it is (an empty text has none)."""
    return AnnotatedText(text, ((0, len(text)),) if text else ())


def source_limit(engine: Engine) -> int:
    """Source pieces a unit may have: the engine's cut (what the model was trained on, where
    recorded), less one for a multilingual model's target-language tag."""
    return max(1, engine.unit_pieces - (1 if engine.src_tokenizer.tags else 0))


def translate_plans(
    texts: Sequence[str],
    options: TextOptions,
    tokenizer: Tokenizer,
    limit: int,
    units: Units,
    first_number: int = 1,
) -> tuple[Segmented, list[list[Translation]]]:
    """Plain texts prepared and their units translated by ``units`` (one call; one more for
    sentences cut again, :mod:`mtkit.text.recut`): ``plan.translated(results, rank)`` gives
    the texts."""
    plan = prepare(texts, options, tokenizer, limit, first_number)
    if not plan.units:
        return plan, []
    results = units(plan.lines(), [first_number + t for t in plan.owners()])
    if options.split and (parts := plan.recut(results)):  # merged sentences: cut again
        lines, owners = plan.again(parts)
        results = plan.merged(results, parts, units(lines, [first_number + t for t in owners]))
    return plan, results


def translate_documents(
    texts: Sequence[str],
    options: TextOptions,
    tokenizer: Tokenizer,
    limit: int,
    units: Units,
    first_number: int = 1,
    scores: bool = False,
) -> list[TextTranslation]:
    """Each text translated, its layout (and markup) kept: the text layer's entry point.
    HTML and XML: the blocks of every document are plain texts (cut into sentences), whose
    word alignments carry the inline markup (``units`` must give alignments). ``scores``:
    each text with its confidence (``units`` must give them; plain text only)."""
    if options.format == "text":
        plan, results = translate_plans(texts, options, tokenizer, limit, units, first_number)
        return plan.translated(results, scores=scores)
    if scores:
        raise MtkitError(
            f"scores are given per text of format 'text', not {options.format!r} "
            "(a document's words move with its markup)"
        )
    from mtkit.text.markup import translate_markup

    plain = replace(options, format="text", split=True)

    def blocks(found: list[str]) -> list[tuple[str, Alignment | None]]:
        plan, results = translate_plans(found, plain, tokenizer, limit, units, first_number)
        return [(t.text, t.alignment) for t in plan.translated(results)]

    return [
        TextTranslation(document) for document in translate_markup(texts, options.format, blocks)
    ]


def engine_units(
    engine: Engine,
    search: SearchConfig | None,
    progress: Progress | None = None,
    constrain: Constrain | None = None,
) -> Units:
    """``engine`` translating units with ``search`` (``progress`` told of each batch), each
    unit with the phrases ``constrain`` gives it (:mod:`mtkit.text.glossary`)."""

    def translate(lines: list[str], numbers: list[int]) -> list[list[Translation]]:
        phrases = None
        if constrain is not None:
            phrases = [constrain(line, n) for line, n in zip(lines, numbers, strict=True)]
        return engine.translate(
            lines, search, first_number=numbers, progress=progress, constraints=phrases
        )

    return translate


def translate_texts(
    engine: Engine,
    texts: Sequence[str],
    options: TextOptions,
    search: SearchConfig | None = None,
    first_number: int = 1,
    progress: Progress | None = None,
    constrain: Constrain | None = None,
) -> list[TextTranslation]:
    """:func:`translate_documents` through ``engine`` (its search unless ``search``; word
    alignments asked for where markup needs them; confidence where the search asks for
    it). ``progress`` hears of each batch when units are the texts themselves (plain text,
    not split), else of the texts at the end. ``constrain`` gives each unit its constraints
    (the search must have a constraint kind)."""
    search = search or engine.config.search
    if options.needs_alignment and not search.alignment:
        search = search.replace(alignment=True)
    per_batch = not options.split and options.format == "text"
    units = Counted(engine_units(engine, search, progress if per_batch else None, constrain))
    found = translate_documents(
        texts,
        options,
        engine.src_tokenizer,
        source_limit(engine),
        units,
        first_number,
        search.scores,
    )
    if progress is not None:  # the texts with nothing to translate, or all of them
        progress.update(len(texts) - units.lines if per_batch else len(texts))
    return found


def translate_text(
    engine: Engine,
    texts: Sequence[str],
    lang: str,
    search: SearchConfig | None = None,
    first_number: int = 1,
) -> list[str]:
    """Each plain text translated sentence by sentence, its layout kept."""
    found = translate_texts(engine, texts, TextOptions(lang), search, first_number)
    return [t.text for t in found]
