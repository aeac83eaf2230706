"""`mtkit translate`: load an engine, stream text through it, write one line (or n-best rows) each.

The input is read in chunks of ``config.chunk_lines`` lines; each chunk goes to the engine
(:mod:`mtkit.engines`: mtkit's own search over checkpoints, or CTranslate2 over an export),
which encodes it with the source spm model, batches it by tokens, translates it and gives the
translations back in input order; the chunk is written (and flushed) before the next is read.
Memory stays bounded whatever the input's size.

With ``config.split_sentences`` each line is a text: cut into sentences (:mod:`mtkit.text`),
each translated, put back with the line's own spacing; a sentence too long for the model is cut
into parts, each translated (a warning names the line). Without it each line is one sentence.

Line rules: exactly one output line per input line (``nbest`` > 1: ``nbest`` TSV rows per input
line). Lines are split on ``\\n`` only; a trailing ``\\r`` (CRLF) and a UTF-8 byte-order mark at
the start are dropped. Invalid UTF-8 is decoded with U+FFFD replacement characters and a warning
naming the line (a 10-million-line job should not die at line 9 million). An empty or
whitespace-only line, or one with no sentencepiece pieces, gives an empty translation. A line of
more than ``config.max_input_tokens`` pieces (or the model's ``max_positions - 1``) is truncated,
with a warning naming it. Newlines and tabs that a translation might contain become spaces.

SIGINT and SIGTERM stop a run at once but never in the middle of writing a chunk (see
:mod:`mtkit.pipeline.signals`): on stdout the chunks already written stay, whole and flushed; a
file output is not written at all.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Collection, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from itertools import islice
from typing import Any, BinaryIO

from mtkit.config import TranslateConfig
from mtkit.data.lines import decode_lines
from mtkit.engines import load_engine
from mtkit.engines.alignment import moses
from mtkit.engines.base import Engine, Progress, Translation, one_line, warn
from mtkit.engines.confidence import Confidence
from mtkit.errors import MtkitError, naming_output
from mtkit.pipeline.signals import Interrupted, SignalGuard
from mtkit.pipeline.translate_paths import STDIO, TranslateStats, check_paths
from mtkit.staging import staged_file
from mtkit.text import TextOptions, TextTranslation, translate_texts
from mtkit.text.files import FileError
from mtkit.text.files.plain import decode_text
from mtkit.text.glossary import (
    Constrain,
    Glossary,
    constraining,
    read_glossary,
    split_constraints,
)
from mtkit.text.translate import as_trained

MAX_ENCODING_WARNINGS = 10


def format_results(
    results: list[list[Translation]],
    first_number: int,
    nbest: int,
    alignment: bool = False,
    word_scores: bool = False,
) -> str:
    """Output text of a chunk: one line per input line, or ``nbest`` TSV rows per input line.

    TSV columns: ``LINE`` (1-based input line), ``RANK`` (1 = best), ``SCORE`` (length-penalised,
    used for ranking), ``LOGPROB`` (summed token log-probabilities incl. EOS), ``TRANSLATION``,
    with ``word_scores`` ``WORD_SCORES`` (:func:`word_column`) and with ``alignment``
    ``ALIGNMENT`` (Moses pairs). A line with nothing to translate gives ``nbest`` rows with
    score 0 and an empty translation; a line with fewer hypotheses (fewer meet its
    constraints within the length limit) is filled with rows of score -inf.
    """
    if nbest <= 1:
        best = [
            TextTranslation(hyps[0].text, hyps[0].alignment, hyps[0].confidence)
            if hyps
            else TextTranslation("", (), Confidence())
            for hyps in results
        ]
        return format_texts(best, alignment, word_scores=word_scores)
    rows = []
    blank = [Translation("", 0.0, 0.0, 0, (), Confidence())] * nbest
    missing = Translation("", -math.inf, -math.inf, 0, (), Confidence())
    for number, hyps in enumerate(results, start=first_number):
        hyps = [*hyps, *[missing] * (nbest - len(hyps))] if hyps else blank
        for rank, hyp in enumerate(hyps, start=1):
            text = hyp.text.replace("\t", " ")
            extra = f"\t{word_column(hyp.confidence)}" if word_scores else ""
            extra += f"\t{moses(hyp.alignment or ())}" if alignment else ""
            rows.append(f"{number}\t{rank}\t{hyp.score:.4f}\t{hyp.logprob:.4f}\t{text}{extra}\n")
    return "".join(rows)


def format_texts(
    found: list[TextTranslation],
    alignment: bool = False,
    scores: bool = False,
    word_scores: bool = False,
) -> str:
    """One line per translation, with more columns when asked, in this order:
    ``[SCORE<TAB>]TRANSLATION[<TAB>WORD_SCORES][<TAB>ALIGNMENT]``. SCORE: the length-normalised
    log-probability (:mod:`mtkit.engines.confidence`; ``word_scores`` implies it), WORD_SCORES
    :func:`word_column`, ALIGNMENT Moses ``i-j`` pairs. With more than one column a tab in a
    translation becomes a space."""
    if not (alignment or scores or word_scores):
        return "".join(t.text + "\n" for t in found)
    rows = []
    for t in found:
        row = [t.text.replace("\t", " ")]
        if scores or word_scores:
            row.insert(0, f"{(t.confidence or Confidence()).normalized:.4f}")
        if word_scores:
            row.append(word_column(t.confidence))
        if alignment:
            row.append(moses(t.alignment or ()))
        rows.append("\t".join(row) + "\n")
    return "".join(rows)


def word_column(confidence: Confidence | None) -> str:
    """Per whitespace word of a translation, the mean log-probability of its pieces (0 for a
    word copied verbatim), space-separated, as many as the translation has words."""
    return " ".join(f"{score:.4f}" for score in (confidence or Confidence()).word_scores())


# ---------------------------------------------------------------------------------------------
# Streams, files and lists


def read_lines(stream: BinaryIO) -> Iterator[str]:
    """Decode a binary stream line by line (see the module docstring for the rules)."""
    bad = 0

    def replaced(message: str) -> None:  # lenient: warn for the first lines, then go on
        nonlocal bad
        bad += 1
        if bad <= MAX_ENCODING_WARNINGS:
            more = " (further invalid lines not reported)" if bad == MAX_ENCODING_WARNINGS else ""
            warn(f"{message}, bad bytes replaced by U+FFFD{more}")

    name = getattr(stream, "name", None)
    return decode_lines(stream, name if isinstance(name, str) else "<input>", replaced)


def translate_stream(
    engine: Engine,
    lines: Iterable[str],
    out: BinaryIO,
    progress: Progress | None = None,
    guard: SignalGuard | None = None,
    glossary: Glossary | None = None,
) -> int:
    """Translate ``lines`` chunk by chunk into ``out`` (flushed per chunk); returns the count.

    Under ``guard`` a signal raises :class:`Interrupted` (with the count of lines written)
    between writes, never in the middle of one. ``glossary`` terms become constraints.
    """
    iterator = iter(lines)
    written = 0
    try:
        while chunk := list(islice(iterator, engine.config.chunk_lines)):
            data = translate_chunk(engine, chunk, written + 1, progress, glossary).encode("utf-8")
            with guard.writing() if guard is not None else nullcontext():
                out.write(data)
                out.flush()
                written += len(chunk)
    except Interrupted as err:
        err.lines = written
        raise
    return written


def translate_chunk(
    engine: Engine,
    chunk: list[str],
    first_number: int,
    progress: Progress | None = None,
    glossary: Glossary | None = None,
) -> str:
    """A chunk's output text: one line per input line (n-best: ``nbest`` TSV rows each).
    With ``constraints_in_input`` each line is ``SOURCE<TAB>PHRASE...``; ``glossary`` terms
    found in a sentence become its constraints too."""
    search, word_scores = engine.config.search, engine.config.word_scores
    given = None
    if engine.config.constraints_in_input:
        split = [split_constraints(line) for line in chunk]
        chunk = [source for source, _ in split]
        given = {first_number + i: phrases for i, (_, phrases) in enumerate(split)}
    constrain = constraining(glossary, given)
    if search.nbest > 1:
        phrases = (
            None
            if constrain is None
            else [constrain(line, first_number + i) for i, line in enumerate(chunk)]
        )
        results = engine.translate(
            chunk, first_number=first_number, progress=progress, constraints=phrases
        )
        return format_results(results, first_number, search.nbest, search.alignment, word_scores)
    keep = glossary.source_words if glossary else ()
    found = translated(engine, chunk, first_number, progress, constrain, keep)
    return format_texts(found, search.alignment, search.scores, word_scores)  # no "\n" in gaps


def translated(
    engine: Engine,
    lines: list[str],
    first_number: int = 1,
    progress: Progress | None = None,
    constrain: Constrain | None = None,
    keep: Collection[str] = (),
) -> list[TextTranslation]:
    """Each line's best translation (with its alignment when the search asks for one) through
    the text layer: a line is a sentence, or with ``split_sentences`` a text; ``constrain``
    gives each sentence its constraints (``keep``: the source words of its glossary)."""
    return translate_texts(
        engine,
        lines,
        text_options(engine, keep),
        first_number=first_number,
        progress=progress,
        constrain=constrain,
    )


def text_options(engine: Engine, keep: Collection[str] = ()) -> TextOptions:
    """How ``engine``'s config reads lines (:class:`mtkit.text.TextOptions`); ``keep``: words
    spelling correction leaves alone (a glossary's)."""
    config = engine.config
    options = TextOptions(
        source_language(engine),
        config.split_sentences,
        config.spans,
        config.format,
        engine.max_source_pieces,
    )
    return as_trained(engine, options, keep)


def source_language(engine: Engine) -> str:
    """The language the segmenter is told: the model's (first) source language, else
    English (sentencex's rules for languages it does not know)."""
    languages = engine.languages()
    return languages.sources[0] if languages is not None and languages.sources else "en"


def translate_file(
    checkpoints: list[str],
    input: str,
    output: str,
    config: TranslateConfig,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    show_progress: bool = False,
) -> TranslateStats:
    """Translate ``input`` (a path, or ``-`` for ``stdin``) into ``output`` (path or ``-``).

    A file output is written to a temporary file beside it and renamed at the end, so an error
    or an interruption never leaves a partial output. SIGINT or SIGTERM raise
    :class:`Interrupted`: on stdout, the chunks written before it stay (whole and flushed); a
    file output is left as it was.
    """
    check_paths(input, output)
    glossary = (
        read_glossary(config.glossary, config.glossary_ignore_case) if config.glossary else None
    )
    start = time.perf_counter()
    progress = None
    with SignalGuard() as guard, naming_output("<stdout>" if output == STDIO else output):
        try:
            engine = load_engine(checkpoints, config)
            progress = _progress_bar() if show_progress else None
            with _open_input(input, stdin) as source:
                if config.format != "text":  # one document: read whole, written whole
                    name = "<stdin>" if input == STDIO else input
                    count = translate_document(engine, source, output, stdout, glossary, name)
                elif output == STDIO:
                    out = stdout or sys.stdout.buffer
                    count = translate_stream(
                        engine, read_lines(source), out, progress, guard, glossary
                    )
                else:
                    count = _translate_to_file(
                        engine, read_lines(source), output, progress, guard, glossary
                    )
        finally:
            if progress is not None:
                progress.close()
    return TranslateStats(count, time.perf_counter() - start)


def _open_input(input: str, stdin: BinaryIO | None) -> AbstractContextManager[BinaryIO]:
    if input == STDIO:
        return nullcontext(stdin or sys.stdin.buffer)  # left open: not ours to close
    try:
        return open(input, "rb")
    except OSError as err:
        raise MtkitError(f"{input}: cannot read ({err.strerror or err})") from None


def _translate_to_file(
    engine: Engine,
    lines: Iterable[str],
    output: str,
    progress: Progress | None,
    guard: SignalGuard | None = None,
    glossary: Glossary | None = None,
) -> int:
    """Write to a temporary file beside ``output``; rename it over ``output`` when complete."""
    with staged_file(output) as handle:
        return translate_stream(engine, lines, handle, progress, guard, glossary)


def translate_document(
    engine: Engine,
    source: BinaryIO,
    output: str,
    stdout: BinaryIO | None = None,
    glossary: Glossary | None = None,
    name: str = "<stdin>",
) -> int:
    """The whole of ``source`` (named ``name`` in errors) as one HTML or XML document
    (``config.format``), translated into ``output`` (written whole, or not at all); returns 1.
    The document must be UTF-8 text (:func:`~mtkit.text.files.plain.decode_text`, as the
    server's uploads); ``glossary`` terms found in a sentence become its constraints."""
    try:  # as the server reads an uploaded document: strictly, a byte-order mark kept
        text = decode_text(source.read())
    except FileError as err:
        raise MtkitError(f"{name}: {err}") from None
    (found,) = translate_texts(
        engine,
        [text],
        text_options(engine, glossary.source_words if glossary else ()),
        constrain=constraining(glossary),
    )
    if output == STDIO:
        out = stdout or sys.stdout.buffer
        out.write(found.text.encode("utf-8"))
        out.flush()
    else:
        with staged_file(output) as handle:
            handle.write(found.text.encode("utf-8"))
    return 1


def _progress_bar() -> Any:
    from tqdm import tqdm

    return tqdm(unit=" lines", file=sys.stderr, dynamic_ncols=True, mininterval=0.5)


def translate_lines(checkpoints: list[str], lines: list[str], config: TranslateConfig) -> list[str]:
    """Translate a list of sentences (the best hypothesis each); one output per input."""
    return translate_with(load_engine(checkpoints, config), lines)


def translate_with(engine: Engine, lines: list[str]) -> list[str]:
    """Translate with an already loaded engine; one output per input, on one line (a line
    break inside an input, kept where it was by the text layer, becomes a space)."""
    size = engine.config.chunk_lines
    return [
        one_line(t.text)
        for start in range(0, len(lines), size)
        for t in translated(engine, lines[start : start + size], start + 1)
    ]
