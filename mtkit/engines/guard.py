"""The decoding guard: a line whose translation degenerates is translated another way.

With ``SearchConfig.guard`` (the default), :meth:`Engine.translate
<mtkit.engines.base.Engine.translate>` searches through :func:`guarded`. A line in ALL CAPS,
or in Title Case of three words or more, without constraints, is searched lowercased and its
case put back on every translation (``recased``): a model learns such text from few
examples, if any, and one trained on clean text falls into loops on it (the demo model: 0.0
BLEU on uppercased captions, against 27 for the same captions lowercased). Then each line's
best translation is checked. One that is degenerate
(:func:`mtkit.decoding.guard.degeneration`: a run of one character or one piece far beyond
anything in its source, or far more pieces than the source has) is replaced by the first of
these that is not:

1. ``lowercased``: a source with an upper case letter, translated lowercased, the source's
   case put back on the translation (:func:`~mtkit.decoding.guard.with_case`: ALL CAPS in,
   ALL CAPS out; Title Case in, Title Case out; a sentence's first letter); not a long line
   cut short (a run-on, which its case does not shorten);
2. ``split``: a source of more than ``SPLIT_PIECES`` (64) pieces and without constraints, cut
   at whitespace into chunks of about equal size, at most 64 pieces each (or the engine's
   limit), each translated, joined with spaces (an ALL CAPS or Title Case source lowercased
   first and its case put back). One translation for the line, scores summed;
3. ``norepeat``: translated again (as in step 1 or 2: lowercased where cased, in parts where
   long) with every repeated n-gram of ``NO_REPEAT`` (3) pieces banned (``--no-repeat-ngram
   3``), which no loop survives; skipped where the search bans repeats already;
4. ``squeezed``: the last translation made (the original, or a retry's), every run of one
   character that its source does not have cut short (:func:`~mtkit.decoding.guard.squeezed`).

So no translation holds a run of 10 identical characters that its source does not have. The
line's translations (all of an n-best list) are replaced and carry how
(:attr:`Translation.guard <mtkit.engines.results.Translation.guard>`), and one warning names
the line, why and what was done. A clean translation is never touched, so the guard changes
no output that is not degenerate. The retries run without the guard, each step one batch of
all the lines it takes. A translation the search stopped in a loop (:attr:`Translation.stopped
<mtkit.engines.results.Translation.stopped>`: the engine asks greedy and beam searches to stop
loops where the guard will retry them, steps 1 and 2 included) is degenerate whatever its text.
On an engine that steps several callers' searches together (a server's, :func:`concurrent`),
step 3 of a line that step 1 retries and step 2 leaves alone (a short line) is searched at once
beside step 1, and used only where step 1 fails (called off once step 1 mends them all: its
rows leave the running decode): the same translations, one search's wait instead of two.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Protocol

from mtkit.config import SearchConfig
from mtkit.data.lines import Numbers, line_numbers
from mtkit.data.tags import split_tag
from mtkit.data.tokenizer import Tokenizer
from mtkit.decoding.guard import (
    CUT_SHORT,
    SPLIT_PIECES,
    TITLE,
    UPPER,
    case_pattern,
    chunk_sizes,
    degeneration,
    squeezed,
    with_case,
)
from mtkit.decoding.scheduler import CANCELLED, Cancelled, cancellation
from mtkit.engines.confidence import Confidence
from mtkit.engines.results import Progress, Translation, warn
from mtkit.errors import MtkitError

# a retry's search: each line's source piece ids and translations (none: nothing searched)
Retry = tuple[list[list[int]], list[list[Translation]]]
LOWERCASED, SPLIT, NO_REPEATS, SQUEEZED = "lowercased", "split", "norepeat", "squeezed"
RECASED = "recased"  # an ALL CAPS or Title Case line, translated lowercased from the start
RECASE_WORDS = 3  # a Title Case line of fewer words is translated as it is
NO_REPEAT = 3  # the n-gram size step 3 bans repeats of


class Engine(Protocol):
    """What the guard asks of an engine (:class:`mtkit.engines.base.Engine` has it): its
    tokenizers, its source limit and its search without the guard."""

    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer

    @property
    def max_source_pieces(self) -> int: ...

    def search_lines(
        self,
        lines: Sequence[str],
        search: SearchConfig,
        first_number: Numbers = 1,
        progress: Progress | None = None,
        constraints: Sequence[Sequence[str]] | None = None,
        quiet: bool = False,
    ) -> tuple[list[list[int]], list[list[Translation]]]: ...


@dataclass
class _Line:
    """A line whose translation degenerated, and what the guard has tried on it."""

    index: int  # in the lines given
    number: int  # in warnings
    line: str
    reason: str  # what was wrong with its translation
    hyps: list[Translation]  # the last translations made
    how: str = ""  # what gave them ("": the search)
    done: bool = False  # a retry gave a clean translation

    @property
    def tag(self) -> str:
        return split_tag(self.line)[0]

    @property
    def body(self) -> str:
        """The line without a multilingual model's leading tag."""
        return split_tag(self.line)[1]


def guarded(
    engine: Engine,
    lines: Sequence[str],
    search: SearchConfig,
    first_number: Numbers = 1,
    progress: Progress | None = None,
    constraints: Sequence[Sequence[str]] | None = None,
) -> list[list[Translation]]:
    """:meth:`Engine.search_lines` with the guard: ALL CAPS and Title Case lines searched
    lowercased, their case put back; then every line whose best translation degenerated
    translated again (the module's docstring)."""
    patterns = [
        _recase(line, constraints is not None and bool(constraints[i]))
        for i, line in enumerate(lines)
    ]
    shown = [
        line if pattern is None else split_tag(line)[0] + split_tag(line)[1].lower()
        for line, pattern in zip(lines, patterns, strict=True)
    ]
    sources, results = engine.search_lines(shown, search, first_number, progress, constraints)
    results = _retried(engine, shown, sources, results, search, first_number, constraints)
    return [
        hyps
        if pattern is None
        else [
            replace(h, text=with_case(h.text, pattern), guard=joined_ways([RECASED, h.guard]))
            for h in hyps
        ]
        for hyps, pattern in zip(results, patterns, strict=True)
    ]


def _recase(line: str, constrained: bool) -> str | None:
    """The case to put back on a line translated lowercased: ALL CAPS (two cased letters or
    more) or Title Case of ``RECASE_WORDS`` words or more, and no constraints (their target
    phrases would be cased too); None: the line is translated as it is."""
    body = split_tag(line)[1]
    pattern = case_pattern(body)
    if constrained or pattern not in (UPPER, TITLE):
        return None
    return pattern if pattern == UPPER or len(body.split()) >= RECASE_WORDS else None


def _retried(
    engine: Engine,
    lines: Sequence[str],
    sources: list[list[int]],
    results: list[list[Translation]],
    search: SearchConfig,
    first_number: Numbers = 1,
    constraints: Sequence[Sequence[str]] | None = None,
) -> list[list[Translation]]:
    """``results`` (each line's translations, ``sources`` its source piece ids) with every
    line whose best translation degenerated translated again (the module's docstring)."""
    numbers = line_numbers(first_number, len(lines))
    reasons = _reasons(
        engine, list(lines), sources, [hyps[0] if hyps else None for hyps in results]
    )
    bad = [_Line(i, numbers[i], lines[i], why, results[i]) for i, why in enumerate(reasons) if why]
    if not bad:
        return results
    phrases = [[] for _ in lines] if constraints is None else [list(p) for p in constraints]
    given = None if constraints is None else phrases
    cased = [b for b in bad if any(c.isupper() for c in b.body)]
    lowered = [b for b in cased if not b.reason.startswith(CUT_SHORT)]
    # steps 1 and 2 search as the first search did, its loops stopped; step 3 bans repeats
    banned = search.replace(guard=False, no_repeat_ngram=NO_REPEAT)
    ahead: list[_Line] = []  # their step 3 searched beside step 1
    early: Retry = ([], [])
    if not search.no_repeat_ngram and concurrent(engine):
        ahead = [b for b in lowered if phrases[b.index] or _chunks(engine, b) is None]
    if ahead:
        early = _beside(engine, lowered, ahead, (search, banned), given)
    else:
        _again(engine, lowered, search, given, LOWERCASED)
    _split(engine, [b for b in bad if not b.done and not phrases[b.index]], search, SPLIT)
    if not search.no_repeat_ngram:
        _split(engine, [b for b in bad if not b.done and not phrases[b.index]], banned, NO_REPEATS)
        _apply(engine, ahead, early, NO_REPEATS)
        todo = [b for b in bad if not b.done and b not in ahead]
        _again(engine, todo, banned, given, NO_REPEATS)
    out = list(results)
    for b in bad:
        if not b.done:
            b.hyps = [replace(h, text=squeezed(h.text, b.line)) for h in b.hyps]
            b.how = SQUEEZED
        out[b.index] = [replace(h, guard=b.how) for h in b.hyps]
        _warn(b)
    return out


def _reasons(
    engine: Engine, lines: list[str], sources: list[list[int]], best: list[Translation | None]
) -> list[str | None]:
    """Why each line's translation ``best`` is degenerate; None for a clean one (or none)."""
    src, tgt = engine.src_tokenizer, engine.tgt_tokenizer
    texts = [h.text for h in best if h is not None]
    pieces = iter(tgt.encode(texts) if texts else [])
    found: list[str | None] = []
    for line, row, hyp in zip(lines, sources, best, strict=True):
        if hyp is None:
            found.append(None)
            continue
        target = [tgt.id_to_piece(i) for i in next(pieces)]
        source = [src.id_to_piece(i) for i in row]
        found.append(hyp.stopped or degeneration(line, source, hyp.text, target))
    return found


def _again(
    engine: Engine,
    todo: list[_Line],
    search: SearchConfig,
    phrases: list[list[str]] | None,
    how: str,
) -> None:
    """Steps 1 and 3: each line translated again with ``search``, lowercased where it has an
    upper case letter, its case put back. A retry whose constraints no longer fit the length
    limit is left to the next step."""
    _apply(engine, todo, _searched(engine, todo, search, phrases), how)


def _beside(
    engine: Engine,
    lowered: list[_Line],
    ahead: list[_Line],
    searches: tuple[SearchConfig, SearchConfig],
    phrases: list[list[str]] | None,
) -> Retry:
    """Step 1 of ``lowered`` (applied), while step 3 of ``ahead`` (some of them) is searched
    beside it: step 3's search (not applied), or nothing where step 1 mended every line of
    ``ahead`` first (step 3 is then called off: its rows leave the running decode)."""
    step1, step3 = searches
    mended = threading.Event()
    wanted = cancellation()  # the request's (a server's cancellation)
    context = contextvars.copy_context()
    context.run(CANCELLED.set, lambda: mended.is_set() or wanted())
    with ThreadPoolExecutor(1) as pool:
        beside = pool.submit(context.run, _searched, engine, ahead, step3, phrases)
        _again(engine, lowered, step1, phrases, LOWERCASED)
        if all(b.done for b in ahead):
            mended.set()
        try:
            return beside.result()
        except Cancelled:
            if not mended.is_set() or wanted():
                raise
            return [], []


def _searched(
    engine: Engine, todo: list[_Line], search: SearchConfig, phrases: list[list[str]] | None
) -> Retry:
    """:func:`_again`'s search: each line's source pieces and translations, lowercased; none
    where its constraints no longer fit the length limit (or nothing to do)."""
    if not todo:
        return [], []
    try:
        return engine.search_lines(
            [_lowered(b) for b in todo],
            search,
            [b.number for b in todo],
            quiet=True,
            constraints=None if phrases is None else [phrases[b.index] for b in todo],
        )
    except MtkitError:
        return [], []


def _apply(engine: Engine, todo: list[_Line], retry: Retry, how: str) -> None:
    """The translations of :func:`_searched` (for ``todo``, or none) given to their lines not
    done yet, their case put back: done where clean."""
    sources, found = retry
    if not found:
        return
    lowered = [_lowered(b) for b in todo]
    reasons = _reasons(engine, lowered, sources, [h[0] if h else None for h in found])
    for b, hyps, why in zip(todo, found, reasons, strict=True):
        if not hyps or b.done:
            continue
        pattern = case_pattern(b.body)
        b.hyps = [replace(h, text=with_case(h.text, pattern)) for h in hyps]
        b.how, b.done = how, why is None


def _lowered(b: _Line) -> str:
    """The line with its text (not its tag) lowercased."""
    return b.tag + b.body.lower()


def concurrent(engine: Engine) -> bool:
    """Whether ``engine`` decodes several callers' searches together (a server's scheduler,
    :meth:`~mtkit.engines.native.NativeEngine.schedule`): then a line that step 1 may not
    mend has its step 3 searched beside it, which costs its latency one search instead of
    two (the same translations: each line is searched as if alone, and step 3's is used
    only where step 1's is degenerate)."""
    return getattr(engine, "scheduler", None) is not None


def _split(engine: Engine, todo: list[_Line], search: SearchConfig, how: str) -> None:
    """Steps 2 and 3: each long line in chunks, each chunk translated with ``search``, the
    chunks' best joined (a chunk leaves room for a multilingual model's tag within the
    engine's limit)."""
    plans = []  # (line, its chunks, its case pattern)
    for b in todo:
        if (chunks := _chunks(engine, b)) is not None:
            plans.append((b, chunks, case_pattern(b.body)))
    if not plans:
        return
    lines = [f"{b.tag} {chunk}" if b.tag else chunk for b, chunks, _ in plans for chunk in chunks]
    numbers = [b.number for b, chunks, _ in plans for _ in chunks]
    sources, found = engine.search_lines(lines, search, numbers, quiet=True)
    reasons = iter(_reasons(engine, lines, sources, [h[0] if h else None for h in found]))
    parts = iter(found)
    nothing = Translation("", 0.0, 0.0, 0, (), Confidence())  # a chunk with no pieces
    for b, chunks, pattern in plans:
        best = [(next(parts) or [nothing])[0] for _ in chunks]
        clean = all(next(reasons) is None for _ in chunks)
        joined = joined_translation(best, [len(chunk.split()) for chunk in chunks])
        b.hyps = [replace(joined, text=with_case(joined.text, pattern))]
        b.how, b.done = joined_ways([SPLIT, how]) or SPLIT, clean


def _chunks(engine: Engine, b: _Line) -> list[str] | None:
    """The chunks steps 2 and 3 cut the line into (ALL CAPS and Title Case lowercased); None
    for a line within the chunk size, which they leave to the other steps."""
    limit = max(1, min(SPLIT_PIECES, engine.max_source_pieces - 1))
    body = b.body.lower() if case_pattern(b.body) in (UPPER, TITLE) else b.body
    words, counts = _covered(engine, body.split())
    if sum(counts) <= limit:
        return None
    chunks, at = [], 0
    for size in chunk_sizes(counts, limit):
        chunks.append(" ".join(words[at : at + size]))
        at += size
    return chunks


def _covered(engine: Engine, words: list[str]) -> tuple[list[str], list[int]]:
    """The first of ``words`` that the search read of their line (up to the engine's
    ``max_source_pieces``, the word it cut in included) and their piece counts; the rest is
    left out, as the search truncated it."""
    cap = engine.max_source_pieces
    kept: list[str] = []
    counts: list[int] = []
    total, at = 0, 0
    while at < len(words) and total < cap:
        batch = words[at : at + cap]  # no more words than the cap can take
        for word, ids in zip(batch, engine.src_tokenizer.encode(batch), strict=True):
            if total >= cap:
                break
            kept.append(word)
            counts.append(len(ids))
            total += len(ids)
        at += len(batch)
    return kept, counts


def joined_translation(parts: Sequence[Translation], words: Sequence[int]) -> Translation:
    """Translations of consecutive chunks of a line (of ``words`` source words each), one
    after the other with a space: the texts joined, scores, log-probabilities and pieces
    summed, word alignments re-indexed (a chunk's source words after the chunks' before it,
    its target words after their translations') and confidences concatenated, each where
    every part has one.

    >>> a = Translation("Ein Hund", -1.0, -2.0, 3, ((0, 0), (1, 1)))
    >>> b = Translation("rennt.", -0.5, -1.0, 2, ((0, 0),))
    >>> joined_translation([a, b], [2, 1])
    Translation(text='Ein Hund rennt.', score=-1.5, logprob=-3.0, tokens=5, \
alignment=((0, 0), (1, 1), (2, 2)), confidence=None, guard=None, stopped=None)
    """
    texts = [p.text.strip() for p in parts]
    alignment: tuple[tuple[int, int], ...] | None = ()
    source = target = 0
    for part, text, count in zip(parts, texts, words, strict=True):
        if part.alignment is None or alignment is None:
            alignment = None
            continue
        alignment += tuple((i + source, j + target) for i, j in part.alignment)
        source, target = source + count, target + len(text.split())
    confidence = None
    scored = [p.confidence for p in parts if p.confidence is not None]
    if len(scored) == len(parts):
        confidence = Confidence(
            tuple(t for c in scored for t in c.tokens),
            tuple(w for c in scored for w in c.words),
            sum((c.logprob for c in scored), 0.0),
        )
    return Translation(
        " ".join(t for t in texts if t),
        sum(p.score for p in parts),
        sum(p.logprob for p in parts),
        sum(p.tokens for p in parts),
        alignment,
        confidence,
    )


def joined_ways(ways: Iterable[str | None]) -> str | None:
    """How the guard translated several units (:attr:`Translation.guard` values, or such
    values joined already), each way once, in order, joined with commas; None for none.

    >>> joined_ways([None, "lowercased", "split,lowercased", "squeezed"])
    'lowercased,split,squeezed'
    """
    found = [w for way in ways for w in (way or "").split(",") if w]
    return ",".join(dict.fromkeys(found)) or None


def _warn(b: _Line) -> None:
    what = {
        LOWERCASED: "translated again lowercased, its case put back",
        SPLIT: "translated again in parts",
        f"{SPLIT},{NO_REPEATS}": f"translated again in parts, repeated {NO_REPEAT}-grams banned",
        NO_REPEATS: f"translated again, repeated {NO_REPEAT}-grams banned",
        SQUEEZED: "no retry helped: runs of one character the source lacks cut short",
    }
    warn(f"line {b.number}: a degenerate translation ({b.reason}); {what[b.how]}")
