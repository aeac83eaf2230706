"""Translate whole texts, the text layer's one entry point (:func:`translate_documents`) that
`mtkit translate`, `mtkit serve` (requests and files) and the file formats
(:mod:`mtkit.text.files`) share, for every engine.

Plain texts are planned (:mod:`mtkit.text.plan`: sentences, masked spans, parts of long ones),
their units translated in one call (so batching across texts goes on as before; one more for
sentences merged by the segmenter and cut again, :mod:`mtkit.text.recut`), and put back. HTML
and XML documents are read (:mod:`mtkit.text.markup`), their segments translated as plain texts,
and written back with the markup carried by the word alignments.

Who translates the units is the caller's: an engine (:func:`engine_units`; :func:`translate_texts`
over one) or the server's cross-request batcher; the text layer sees only :data:`Units`, a
function from lines to hypotheses.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

from mtkit.config import SearchConfig
from mtkit.data.sentence_style import SentenceStyle
from mtkit.data.source_words import SourceWords
from mtkit.data.tokenizer import Tokenizer
from mtkit.engines.base import Engine, Progress, Translation
from mtkit.errors import MtkitError
from mtkit.text.annotated import AnnotatedText
from mtkit.text.glossary import Constrain
from mtkit.text.markup import read_markup
from mtkit.text.plan import (
    TextOptions,
    TextTranslation,
    owners,
    plan,
    put_back,
    tagged,
    unit_lines,
)
from mtkit.text.recut import merged, short_units

# lines and each line's number in warnings (its text's) -> hypotheses (an engine, the batcher)
Units = Callable[[list[str], list[int]], list[list[Translation]]]

__all__ = [
    "Counted",
    "as_trained",
    "TextOptions",
    "TextTranslation",
    "Units",
    "engine_units",
    "source_limit",
    "translate_documents",
    "translate_text",
    "translate_texts",
    "translate_units",
]


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


def source_limit(engine: Engine) -> int:
    """Source pieces a unit may have: the engine's cut (what the model was trained on, where
    recorded), less one for a multilingual model's target-language tag."""
    return max(1, engine.unit_pieces - (1 if engine.src_tokenizer.tags else 0))


def translate_documents(
    texts: Sequence[str],
    options: TextOptions,
    tokenizer: Tokenizer,
    limit: int,
    units: Units,
    first_number: int = 1,
    scores: bool = False,
    alternatives: int = 0,
) -> list[TextTranslation]:
    """Each text translated, its layout (and markup) kept: the text layer's entry point.
    ``limit``: source pieces a unit may have (:func:`source_limit`); ``first_number``: the
    first text's number in warnings. Plain texts: with ``scores`` each with its confidence and
    with ``alternatives`` that many more translations (``units`` must give them: scores, and
    as many hypotheses per unit, else a unit's best stands in). HTML and XML: the blocks of
    every document are plain texts (cut into sentences), whose word alignments carry the
    inline markup (``units`` must give alignments)."""
    if options.format == "text":
        found = translate_units(texts, options, tokenizer, limit, units, first_number)
        best = put_back(*found, scores=scores)
        others = [put_back(*found, rank) for rank in range(1, alternatives + 1)]
        return [
            replace(t, alternatives=tuple(o[i].text for o in others)) if others else t
            for i, t in enumerate(best)
        ]
    if scores or alternatives:
        raise MtkitError(
            f"{'scores' if scores else 'alternatives'} are given per text of format 'text', not "
            f"{options.format!r} (a document's words move with its markup)"
        )
    marked = read_markup(texts, options.format)
    plain = replace(options, format="text", split=True)
    found = translate_units(marked.segments, plain, tokenizer, limit, units, first_number)
    return [
        TextTranslation(document)
        for document in marked.written([(t.text, t.alignment) for t in put_back(*found)])
    ]


def translate_units(
    texts: Sequence[str],
    options: TextOptions,
    tokenizer: Tokenizer,
    limit: int,
    units: Units,
    first_number: int = 1,
) -> tuple[list[AnnotatedText], list[list[Translation]]]:
    """Plain texts planned and their units translated by ``units`` (one call; one more for
    sentences cut again, :mod:`mtkit.text.recut`): :func:`~mtkit.text.plan.put_back` gives
    the texts."""
    planned = plan(texts, options, tokenizer, limit, first_number)
    lines = unit_lines(planned, options)
    if not lines:
        return planned, []
    own = owners(planned)
    results = units(lines, [first_number + t for t in own])
    every = [unit for text in planned for unit in text.all_units()]
    sizes = [len(text.all_units()) for text in planned]
    if options.split and (parts := short_units(every, results, sizes)):  # merged: cut again
        texts_again = [own[i] for i, pair in parts.items() for _ in pair]
        again = [
            tagged(options.engine_line(p, True), planned[own[i]].tag)
            for i, pair in parts.items()
            for p in pair
        ]
        numbers = [first_number + t for t in texts_again]
        results = merged(every, results, parts, units(again, numbers))
    return planned, results


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


def as_trained(engine: Engine, options: TextOptions, keep: Collection[str] = ()) -> TextOptions:
    """``options`` reading texts as ``engine``'s training data had them where its config says
    so: the sentence ends they leave out (``sentence_ends``), their typos corrected
    (``spelling``), never a word of ``keep`` (a glossary's source terms, any case); a sentence
    longer than the model was trained on cut into parts of its sentences' typical length; an
    ALL CAPS or Title Case one measured lowercased where the guard translates it so."""
    config = engine.config
    return replace(
        options,
        part=engine.sentence_style.length,
        style=engine.sentence_style if config.sentence_ends else SentenceStyle(),
        words=engine.source_words if config.spelling else SourceWords(),
        keep=frozenset(word.lower() for word in keep),
        lowered=config.search.guard,
    )


def translate_text(
    engine: Engine,
    texts: Sequence[str],
    lang: str,
    search: SearchConfig | None = None,
    first_number: int = 1,
) -> list[str]:
    """Each plain text translated sentence by sentence, its layout kept."""
    options = as_trained(engine, TextOptions(lang))
    found = translate_texts(engine, texts, options, search, first_number)
    return [t.text for t in found]
