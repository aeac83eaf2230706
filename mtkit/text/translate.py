"""Translate whole texts through an engine: segment, translate every sentence, rebuild.

:func:`prepare` cuts each text into sentences (:func:`~mtkit.text.segment.segment`) and each
sentence longer than the engine's limit into parts (:func:`~mtkit.text.segment.cut_long`, one
warning per such sentence, naming its line); the parts of all texts are the *units*, the lines
an engine translates, all in one call (so batching across texts goes on as before). A
:class:`Segmented` puts the units' translations back: a cut sentence's parts joined with a
space, the sentences into the original gaps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from mtkit.config import SearchConfig
from mtkit.data.tokenizer import Tokenizer
from mtkit.engines.alignment import Alignment
from mtkit.engines.base import Engine, Translation, one_line, warn
from mtkit.text.aligned import Piece, joined, located
from mtkit.text.annotated import AnnotatedText
from mtkit.text.recut import merged, short_units
from mtkit.text.segment import cut_long, segment


@dataclass(frozen=True)
class TextTranslation:
    """A text's translation, and its word alignment (Moses pairs over the text's and the
    translation's whitespace words; None unless asked for, or where the engine gives none)."""

    text: str
    alignment: Alignment | None = None


@dataclass
class Segmented:
    """Texts cut into ``units`` for an engine, and how to put their translations back."""

    texts: list[AnnotatedText]
    units: list[str]  # every sentence (or part of a long one) of every text, in order
    parts: list[list[int]]  # per text, per sentence: how many units it was cut into
    offsets: list[int] = field(default_factory=list)  # per unit: where it starts in its sentence

    def sizes(self) -> list[int]:
        """How many units each text has."""
        return [sum(counts) for counts in self.parts]

    def rebuild(self, results: Sequence[Sequence[Translation]], rank: int = 0) -> list[str]:
        """Each text with its sentences translated (hypothesis ``rank`` of each unit, its best
        where it has fewer; "" for a unit with nothing to translate; a sentence of one unit
        exactly as the engine gave it), the gaps as they were."""
        return [found.text for found in self.translated(results, rank)]

    def translated(
        self, results: Sequence[Sequence[Translation]], rank: int = 0
    ) -> list[TextTranslation]:
        """:meth:`rebuild`, each text with the word alignment of the whole text (None unless
        every unit's hypothesis has one)."""
        if len(results) != len(self.units):
            raise ValueError(f"{len(results)} results for {len(self.units)} units")
        offsets = self.offsets or [0] * len(self.units)
        out, at = [], 0
        for text, counts in zip(self.texts, self.parts, strict=True):
            sentences = []
            for count, sentence in zip(counts, text.all_sentences(), strict=True):
                pieces = [_piece(self.units[u], offsets[u], results[u], rank)
                          for u in range(at, at + count)]  # fmt: skip
                at += count
                sentences.append(_sentence(sentence, pieces))
            gaps = [text.gap(i) for i in range(len(text) + 1)]
            whole = [Piece(text.sentence(i), start, *sentences[i])
                     for i, (start, _) in enumerate(text.sentences)]  # fmt: skip
            found = joined(text.text, whole, gaps)
            out.append(TextTranslation(*found))
        return out


def _piece(unit: str, offset: int, hyps: Sequence[Translation], rank: int) -> Piece:
    """A unit and its hypothesis of ``rank`` (an empty translation where it has none)."""
    if not hyps:
        return Piece(unit, offset, "", ())
    hyp = hyps[min(rank, len(hyps) - 1)]
    return Piece(unit, offset, one_line(hyp.text), hyp.alignment)


def _sentence(sentence: str, pieces: list[Piece]) -> tuple[str, Alignment | None]:
    """A sentence's translation: one unit's exactly, or its parts' joined with a space."""
    if len(pieces) == 1:
        return pieces[0].translation, pieces[0].alignment
    kept = [replace(p, translation=p.translation.strip()) for p in pieces
            if p.translation.strip()]  # fmt: skip
    if not kept:
        return "", None if any(p.alignment is None for p in pieces) else ()
    return joined(sentence, kept, [""] + [" "] * (len(kept) - 1) + [""])


def prepare(
    texts: Sequence[str], lang: str, tokenizer: Tokenizer, limit: int, first_number: int = 1
) -> Segmented:
    """``texts`` (of language ``lang``) cut into units of at most ``limit`` source pieces;
    ``first_number`` numbers the texts in warnings (a text is a line of the input)."""
    annotated = [segment(text, lang) for text in texts]
    sentences = [s for text in annotated for s in text.all_sentences()]
    lengths = iter(len(ids) for ids in tokenizer.encode(sentences)) if sentences else iter(())
    units: list[str] = []
    parts: list[list[int]] = []
    offsets: list[int] = []

    def pieces(text: str) -> int:
        return len(tokenizer.encode_one(text))

    for number, text in enumerate(annotated, start=first_number):
        counts = []
        for sentence in text.all_sentences():
            cut = [sentence] if next(lengths) <= limit else cut_long(sentence, pieces, limit)
            if len(cut) > 1:
                warn(f"line {number}: a sentence of {pieces(sentence)} pieces, more than the "
                     f"limit of {limit}, cut into {len(cut)} parts, each translated")  # fmt: skip
            units.extend(cut)
            offsets.extend(located(sentence, cut))
            counts.append(len(cut))
        parts.append(counts)
    return Segmented(annotated, units, parts, offsets)


def source_limit(engine: Engine) -> int:
    """Source pieces a unit may have: the engine's cut, less one for a multilingual model's
    target-language tag."""
    return max(1, engine.max_source_pieces - (1 if engine.src_tokenizer.tags else 0))


def translate_text(
    engine: Engine,
    texts: Sequence[str],
    lang: str,
    search: SearchConfig | None = None,
    first_number: int = 1,
) -> list[str]:
    """Each text translated sentence by sentence, its layout kept (:func:`translate_texts`)."""
    return [found.text for found in translate_texts(engine, texts, lang, search, first_number)]


def translate_texts(
    engine: Engine,
    texts: Sequence[str],
    lang: str,
    search: SearchConfig | None = None,
    first_number: int = 1,
) -> list[TextTranslation]:
    """Each text translated sentence by sentence, its layout kept: one engine call for the
    sentences of all ``texts`` (and one more for sentences cut again, :mod:`mtkit.text.recut`);
    one output per text, with its word alignment when ``search.alignment`` asks for it."""
    plan = prepare(texts, lang, engine.src_tokenizer, source_limit(engine), first_number)
    if not plan.units:
        return plan.translated([])
    results = engine.translate(plan.units, search, first_number=first_number)
    parts = short_units(plan.units, results, plan.sizes())  # merged sentences: cut again
    if parts:
        again = engine.translate([p for pair in parts.values() for p in pair], search)
        results = merged(plan.units, results, parts, again)
    return plan.translated(results)
