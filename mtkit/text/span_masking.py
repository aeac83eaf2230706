"""Spans that must not be translated (URLs, e-mail addresses, numbers, @mentions, #hashtags,
emoji, inline `code`): masked before the model, put back verbatim after.

Finding: :func:`mtkit.text.span_finding.find_spans` (its docstring has the rules).

Masking (:func:`mask`): spans at the start of a sentence, and at its end, with only whitespace
between them (a leading @mention; a trailing URL, hashtags, emoji) are cut off, the model
translates the middle, and they come back with their whitespace. Spans in the middle with only
whitespace between them are a group, replaced by one placeholder, an integer: a plain integer
its own, others the smallest free ones (no digit run of the text: ``mp3`` keeps 3 free), set
off by spaces from a letter beside it. Digits are what a Transformer copies most reliably, but
the demo en-de model (Multi30k) copied no candidate (1, 7, 42, X, QX, ABC, John, Paris: 0 of 40
captions each), so nothing relies on copying. A sentence with no letter outside its spans masks
to "" (nothing to translate) and restores to itself.

Restoring (:meth:`Masked.restore`) holds for any translation: every group goes in exactly once.
A placeholder found exactly once (a whole digit run) is replaced. Otherwise the group goes where
the alignment puts it (after the target word aligned to the source word before it, or before the
one aligned to the word after), else where its share of the source words puts it (at the end:
before the final punctuation); of several copies of its placeholder, the one nearest there is
replaced. The other copies, and digit runs holding a placeholder that the source lacks (garbled),
are removed with a space beside them; the rest of what the model wrote stays, so a span's text
occurs again only where the model wrote it. Alignments (source word, target word, over
``str.split()`` words) are re-indexed through character offsets: masked words to the original's,
translation words to the restored text's; a placeholder's links are dropped, and each span's
words are linked to their verbatim copy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import regex

from mtkit.engines.alignment import Alignment
from mtkit.text.span_finding import WORDCHAR, Span, find_spans

_WORDS = re.compile(r"\S+")  # re's \s is str.isspace, so these are str.split()'s words
_DIGITS = re.compile(r"[0-9]+")
_LETTER = regex.compile(r"\p{L}")
_OPENING = regex.compile(r"[\p{Ps}\p{Pi}¿¡]")  # no space after these
_CLOSING = regex.compile(r"[\p{Pe}\p{Pf}.,;:!?…%。、，！？]")  # no space before these
_FINAL = ".!?…;:,。！？"  # a translation's final punctuation: an insertion at the end goes before


@dataclass(frozen=True)
class _Group:
    """Spans in the middle with only whitespace between them: ``original[start:end]``."""

    start: int
    end: int
    text: str
    placeholder: str
    pad: tuple[bool, bool]  # a space set off the placeholder from a letter before, after


@dataclass(frozen=True)
class _Layout:
    """``original[:lead]`` the spans cut off at the start, ``original[lead:head]`` the whitespace
    after them; ``original[tail:trail]`` the whitespace before those cut off at the end,
    ``original[trail:]`` them; the middle, ``original[head:tail]``, masked into ``text``."""

    lead: int
    head: int
    tail: int
    trail: int
    text: str
    groups: tuple[_Group, ...]
    source: tuple[int, ...]  # per masked character: its original one; -1 a pad; -2-k group k
    natural: frozenset[str]  # the digit runs of the masked text outside placeholders


def _is_gap(s: str) -> bool:
    return not s.replace("\ufeff", "").strip()


def _layout(original: str, spans: Sequence[Span]) -> _Layout:
    """The edges cut off, the middle's groups and their placeholders (the module docstring)."""
    lead = first = 0
    while first < len(spans) and _is_gap(original[lead : spans[first].start]):
        lead, first = spans[first].end, first + 1
    trail, last = len(original), len(spans)
    while last > first and _is_gap(original[spans[last - 1].end : trail]):
        trail, last = spans[last - 1].start, last - 1
    head = next((i for i in range(lead, trail) if not _is_gap(original[i])), trail) if lead else 0
    tail = trail
    while trail < len(original) and tail > head and _is_gap(original[tail - 1]):
        tail -= 1
    runs: list[list[int]] = []  # the middle's groups: [start, end, number spans]
    for span in spans[first:last]:
        if runs and _is_gap(original[runs[-1][1] : span.start]):
            runs[-1][1:] = [span.end, runs[-1][2] + 1]
        else:
            runs.append([span.start, span.end, 1])
    bounds = [head] + [at for run in runs for at in run[:2]] + [tail]
    plain = [original[a:b] for a, b in zip(bounds[::2], bounds[1::2], strict=True)]
    natural = frozenset(d for part in plain for d in _DIGITS.findall(part))
    names = _placeholders(original, runs, natural)
    text, source, groups = [plain[0]], list(range(head, head + len(plain[0]))), []
    for k, ((start, end, _), name) in enumerate(zip(runs, names, strict=True)):
        pad = (
            bool(WORDCHAR.match(original[start - 1])),
            end < len(original) and bool(WORDCHAR.match(original[end])),
        )
        token = " " * pad[0] + name + " " * pad[1]
        groups.append(_Group(start, end, original[start:end], name, pad))
        text += [token, plain[k + 1]]
        source += [-1] * pad[0] + [-2 - k] * len(name) + [-1] * pad[1]
        source += range(end, end + len(plain[k + 1]))
    masked = "".join(text)
    if not _LETTER.search(masked):  # nothing to translate
        masked, groups, source = "", [], []
    return _Layout(lead, head, tail, trail, masked, tuple(groups), tuple(source), natural)


def _placeholders(original: str, runs: list[list[int]], natural: frozenset[str]) -> list[str]:
    """A group that is one plain integer is its own placeholder where it is free; the others
    take the smallest free integers."""
    names, used = [original[a:b] for a, b, _ in runs], set(natural)
    for k, (_, _, count) in enumerate(runs):
        own = count == 1 and _DIGITS.fullmatch(names[k]) and names[k] not in used
        names[k] = names[k] if own else ""
        used.add(names[k])
    free = (str(n) for n in range(1, len(used) + len(runs) + 2) if str(n) not in used)
    return [name or next(free) for name in names]


def mask(text: str) -> Masked:
    """One sentence (one line) with its spans masked (the module docstring has the rules)."""
    spans = tuple(find_spans(text))
    return Masked(text, _layout(text, spans).text if spans else text, spans)


@dataclass(frozen=True)
class Masked:
    """A sentence, the text a model translates in its stead, and the spans put back after."""

    original: str
    text: str  # what the model translates ("": nothing, the sentence is all spans)
    spans: tuple[Span, ...]

    def restore(
        self, translation: str, alignment: Alignment | None
    ) -> tuple[str, Alignment | None]:
        """The translation of :attr:`text` with every span of :attr:`original` in it verbatim,
        exactly once, and its alignment (against :attr:`text`'s words, or None) re-indexed to
        the original's words and the restored translation's words."""
        if not self.spans:
            return translation, alignment
        original, layout = self.original, _layout(self.original, self.spans)
        if not layout.text:
            words = range(len(original.split()))
            return original, None if alignment is None else tuple((i, i) for i in words)
        restored, fill, at = self._restored(layout, translation, alignment)
        texts = (original, translation, restored)
        return restored, None if alignment is None else _realign(alignment, layout, texts, fill, at)

    def word_sources(self, translation: str, alignment: Alignment | None) -> list[list[int]]:
        """Per word of what :meth:`restore` makes of ``translation`` (and ``alignment``): the
        words of ``translation`` it holds characters of ([] for a span's own words)."""
        if not self.spans:
            return [[j] for j in range(len(translation.split()))]
        layout = _layout(self.original, self.spans)
        if not layout.text:
            return [[] for _ in self.original.split()]
        restored, fill, at = self._restored(layout, translation, alignment)
        of_translation, of_restored = _word_index(translation), _word_index(restored)
        sources: list[list[int]] = [[] for _ in restored.split()]
        for r, t in enumerate(fill.prov, start=at):
            if t is not None and of_translation[t] >= 0 and of_restored[r] >= 0:
                if of_translation[t] not in sources[of_restored[r]]:
                    sources[of_restored[r]].append(of_translation[t])
        return sources

    def _restored(
        self, layout: _Layout, translation: str, alignment: Alignment | None
    ) -> tuple[str, _Fill, int]:
        """The restored translation, the fill that made its middle, where the middle starts."""
        original = self.original
        fill = _Fill(layout, original, translation, alignment)
        core, lead, trail = "".join(fill.out), original[: layout.lead], original[layout.trail :]
        gaps = [original[layout.lead : layout.head], original[layout.tail : layout.trail]]
        if not core.strip():
            core, fill.prov, fill.copies = "", [], []
            gaps = [gaps[0] or gaps[1], ""] if lead and trail else ["", ""]
        else:  # a space where the original had no word character: "@bob: hi" as "hallo"
            gaps[0] = gaps[0] or " " * (bool(lead) and _glued(core[0], original[layout.head]))
            gaps[1] = gaps[1] or " " * (bool(trail) and _glued(core[-1], original[layout.tail - 1]))
        return lead + gaps[0] + core + gaps[1] + trail, fill, len(lead) + len(gaps[0])


def _glued(translated: str, original: str) -> bool:  # a word character where the original had none
    return bool(WORDCHAR.match(translated)) and not WORDCHAR.match(original)


def _word_index(s: str) -> list[int]:
    """Per character of ``s``: the index of its word, -1 for whitespace."""
    index = [-1] * len(s)
    for w, m in enumerate(_WORDS.finditer(s)):
        index[m.start() : m.end()] = [w] * (m.end() - m.start())
    return index


def _placeholder_words(layout: _Layout, original: str) -> tuple[list[set[int]], list[set[int]]]:
    """Per masked word: the original's words it comes from; the groups whose placeholders it
    holds."""
    of_original = _word_index(original)
    sources: list[set[int]] = []
    holds: list[set[int]] = []
    for m in _WORDS.finditer(layout.text):
        here = layout.source[m.start() : m.end()]
        sources.append({of_original[c] for c in here if c >= 0} - {-1})
        holds.append({-2 - c for c in here if c <= -2})
    return sources, holds


class _Fill:
    """The translation's middle with every group put in once: ``out`` its characters, ``prov``
    where each comes from in the translation (None: a span's), ``copies`` where each group's
    copy starts in ``out``."""

    def __init__(
        self, layout: _Layout, original: str, translation: str, alignment: Alignment | None
    ) -> None:
        start = len(translation) - len(translation.lstrip()) if layout.lead else 0
        end = len(translation.rstrip()) if layout.trail < len(original) else len(translation)
        self.layout, self.original, self.end = layout, original, max(start, end)
        self.translation = translation[: self.end]  # the same words: only whitespace cut
        self.out: list[str] = []
        self.prov: list[int | None] = []
        self.copies: list[tuple[int, _Group]] = []
        self.holds = _placeholder_words(layout, original)[1]  # per masked word
        pos = start
        for at, edit, stop, k in sorted(self._events(start, alignment)):
            pos = self._copy(pos, max(at, pos))
            if not edit:
                self._insert(k, pos)
            else:
                pos = self._replace(k, stop) if k >= 0 else self._remove(stop)
        self._copy(pos, self.end)

    def _events(self, start: int, alignment: Alignment | None) -> list[tuple[int, int, int, int]]:
        """What to do where: (offset, 1, end, group) replace, (offset, 1, end, -1) remove,
        (offset, 0, offset, group) insert."""
        names = {g.placeholder: k for k, g in enumerate(self.layout.groups)}
        found: list[list[tuple[int, int]]] = [[] for _ in names]
        events, taken = [], bytearray(len(self.translation))
        for m in _DIGITS.finditer(self.translation, start, self.end):
            if (k := names.get(m[0])) is not None:
                found[k].append(m.span())
            elif m[0] not in self.layout.natural and any(p in m[0] for p in names):
                events.append((m.start(), 1, m.end(), -1))  # garbled
            else:
                continue
            taken[m.start() : m.end()] = b"\x01" * len(m[0])
        self.words = [m.span() for m in _WORDS.finditer(self.translation)]
        self.kept = [
            w for w in self.words if start <= w[0] and w[1] <= self.end and taken.find(1, *w) < 0
        ]
        self._index(alignment)
        for k, spans in enumerate(found):
            at = spans[0][0] if len(spans) == 1 else self._place(k, start)
            best = min(spans, key=lambda s: abs(s[0] - at), default=None)
            events += [(a, 1, b, k if (a, b) == best else -1) for a, b in spans]
            if best is None:
                events.append((at, 0, at, k))
        return events

    def _index(self, alignment: Alignment | None) -> None:
        """What :meth:`_place` looks up, built once for all groups (a line of thousands of
        spans takes time linear in its length): each group's first masked word, each source
        word's aligned target words, and the plain (unmasked) words before each word."""
        self.word_of: dict[int, int] = {}
        for w, held in enumerate(self.holds):
            for k in held:
                self.word_of.setdefault(k, w)
        self.targets: dict[int, list[int]] = {}
        for i, j in alignment or ():
            if 0 <= j < len(self.words):
                self.targets.setdefault(i, []).append(j)
        self.plain = [0]  # plain[w]: words before word w that hold no span
        for held in self.holds:
            self.plain.append(self.plain[-1] + (not held))

    def _place(self, k: int, start: int) -> int:
        """Where group ``k`` goes in the translation: by the alignment, else by its share."""
        word = self.word_of[k]
        for source, pick in ((word - 1, max), (word + 1, min)):
            targets = self.targets.get(source)
            if targets and pick is min:
                return min(max(self.words[min(targets)][0], start), self.end)
            if targets:
                after = min(max(self.words[max(targets)][1], start), self.end)
                return self._end() if not self.kept or after >= self.kept[-1][1] else after
        before, after = self.plain[word], self.plain[-1] - self.plain[word + 1]
        index = round(before / (before + after) * len(self.kept)) if before + after else 0
        return self.kept[index][0] if index < len(self.kept) else self._end()

    def _end(self) -> int:
        """The end of the translation's last word, before its final punctuation."""
        start, at = self.kept[-1] if self.kept else (self.end, self.end)
        while at > start and self.translation[at - 1] in _FINAL:
            at -= 1
        return at

    def _copy(self, start: int, end: int) -> int:
        self.out += self.translation[start:end]
        self.prov += range(start, end)
        return end

    def _put(self, text: str, group: _Group | None = None) -> None:
        if group:
            self.copies.append((len(self.out), group))
        self.out += text
        self.prov += [None] * len(text)

    def _insert(self, k: int, at: int) -> None:
        if self.out and not self.out[-1].isspace() and not _OPENING.match(self.out[-1]):
            self._put(" ")
        self._put(self.layout.groups[k].text, self.layout.groups[k])
        right = self.translation[at : at + 1]
        if right and not right.isspace() and not _CLOSING.match(right):
            self._put(" ")

    def _replace(self, k: int, stop: int) -> int:
        """The placeholder of group ``k`` replaced; where to go on in the translation."""
        pad = self.layout.groups[k].pad
        if self.out and pad[0] and self.out[-1].isspace():
            self.out.pop(), self.prov.pop()
        elif self.out and not pad[0] and WORDCHAR.match(self.out[-1]):
            self._put(" ")
        self._put(self.layout.groups[k].text, self.layout.groups[k])
        right = self.translation[stop : stop + 1]
        if pad[1] and right.isspace():
            return stop + 1
        if not pad[1] and right and WORDCHAR.match(right):
            self._put(" ")
        return stop

    def _remove(self, stop: int) -> int:
        """A stray placeholder removed with a space beside it; where to go on."""
        if not self.out or self.out[-1].isspace():
            while self.translation[stop : stop + 1].isspace():
                stop += 1
        right = self.translation[stop : stop + 1]
        if not right or _CLOSING.match(right):
            while self.out and self.out[-1].isspace():
                self.out.pop(), self.prov.pop()
        return stop


def _realign(
    alignment: Alignment, layout: _Layout, texts: tuple[str, str, str], fill: _Fill, at: int
) -> Alignment:
    """``alignment`` (masked words, translation words) as (original words, restored words),
    ``texts`` the original, the translation, the restored one, ``fill``'s core there at ``at``."""
    original, _, restored = texts
    copies = [
        (0, layout.lead, 0),
        (layout.trail, len(original), len(restored) - len(original) + layout.trail),
    ]
    copies += [(g.start, g.end, at + r) for r, g in fill.copies]
    sources, holds = _placeholder_words(layout, original)
    of_original, of_translation, of_restored = (_word_index(text) for text in texts)
    targets: dict[int, set[int]] = {}
    for r, t in enumerate(fill.prov, start=at):
        if t is not None and of_translation[t] >= 0 and of_restored[r] >= 0:
            targets.setdefault(of_translation[t], set()).add(of_restored[r])
    links = {
        (o, r)
        for i, j in alignment
        if 0 <= i < len(sources) and not holds[i]
        for o in sources[i]
        for r in targets.get(j, ())
    }
    for start, end, to in copies:
        for c in range(end - start):
            o, r = of_original[start + c], of_restored[to + c]
            if o >= 0 and r >= 0:
                links.add((o, r))
    return tuple(sorted(links))
