"""Carry a segment's tags to its translation through the word alignment, and write it back.

Bergamot's model (``src/translator/html.h``): each target word takes the stack of open tags of
the source word aligned to it, and tags open and close where the stack changes. Here a *word* is
a whitespace word (the alignment's unit), and every element and atom of the source appears
exactly once in the output, with its attributes:

1. Target words. A target word aligned to several source words takes the leftmost; with no
   alignment at all, target word ``j`` of ``m`` maps to source word ``j * n // m``. It takes
   that word's stack (the stack of its longest piece); a word the translation leaves unchanged
   keeps its own pieces and the tags inside it. An unaligned word takes the stack its aligned
   neighbours share (their common prefix; one neighbour's stack at an edge).
2. One run per element. Reordering can split an element's words in two; elements are taken
   outermost first, each keeps its longest stretch of consecutive target pieces (the first of
   equals) and leaves the others, so every element opens once and elements nest as they did.
3. Orphans. An element none of whose words is in the translation (all dropped, or only part of
   a changed word) is written empty of text, holding its orphaned children and atoms, at the
   place of its first word (as an atom).
4. Gaps. Between two target pieces that were neighbours in the source, with the same stacks, the
   source gap comes back exactly (whitespace, line breaks, comments, tags): an identity
   translation gives the segment back unchanged. Elsewhere the gap is one space between words
   (none inside a word), and the segment's leading and trailing whitespace stay at its edges.
5. Atoms. An atom not in a gap that came back rides on the word after it (inside a word: the
   word itself), written just before that word's first target piece (just after the last one
   when riding the word before it); a word with no translation passes it to the nearest word
   that has one. It goes as deep into the word's elements as it was in the source.

:mod:`mtkit.text.write` then rebuilds the segment with the source's own lxml nodes, moved.
"""

from __future__ import annotations

from mtkit.engines.alignment import Alignment
from mtkit.text.inline import Run, Stack
from mtkit.text.write import Rider, Target, common, rewrite


def links(n_source: int, n_target: int, alignment: Alignment | None) -> list[int | None]:
    """Per target word, the source word whose tags it takes (the leftmost it is aligned to)."""
    if alignment is None:
        return [j * n_source // n_target for j in range(n_target)]
    out: list[int | None] = [None] * n_target
    for i, j in alignment:
        if 0 <= i < n_source and 0 <= j < n_target:
            known = out[j]
            out[j] = i if known is None else min(known, i)
    return out


def targets(run: Run, words: list[str], alignment: Alignment | None) -> list[Target]:
    """The translation's pieces with the stacks they take from the source (step 1)."""
    spans: dict[int, list[int]] = {}
    for k, piece in enumerate(run.pieces):
        spans.setdefault(piece.word, []).append(k)
    out: list[Target] = []
    kept: set[int] = set()
    sources = links(len(run.words), len(words), alignment)
    for j, (word, i) in enumerate(zip(words, sources, strict=True)):
        if i is None:
            out.append(Target(word, (), j, None, None, None))
        elif word == run.words[i] and i not in kept:
            kept.add(i)
            out += [Target(run.pieces[k].text, run.pieces[k].stack, j, i, k, k) for k in spans[i]]
        else:
            longest = max(spans[i], key=lambda k: len(run.pieces[k].text))
            out.append(Target(word, run.pieces[longest].stack, j, i, spans[i][0], spans[i][-1]))
    _fill_unaligned(out)
    return out


def _fill_unaligned(pieces: list[Target]) -> None:
    """An unaligned piece takes the stack its nearest aligned neighbours share."""
    left: list[Stack | None] = []
    last: Stack | None = None
    for piece in pieces:
        left.append(last)
        last = piece.stack if piece.source is not None else last
    last = None
    for k in range(len(pieces) - 1, -1, -1):
        piece = pieces[k]
        if piece.source is not None:
            last = piece.stack
            continue
        sides = [s for s in (left[k], last) if s is not None]
        piece.stack = sides[0][: common(*sides)] if len(sides) == 2 else (sides or [()])[0]


def contiguous(pieces: list[Target], n_elements: int) -> None:
    """Each element keeps its longest stretch of consecutive pieces (step 2)."""
    spots: list[list[int]] = [[] for _ in range(n_elements)]
    for k, piece in enumerate(pieces):
        for eid in piece.stack:
            spots[eid].append(k)
    for eid in range(n_elements):  # document order: an element before the ones inside it
        mine = [k for k in spots[eid] if eid in pieces[k].stack]  # what its parents left it
        if not mine:
            continue
        runs, start = [], mine[0]
        for before, k in zip(mine, mine[1:] + [-1], strict=True):
            if k != before + 1:
                runs.append((start, before))
                start = k
        first, last = max(runs, key=lambda r: r[1] - r[0])  # the first of the longest
        for k in mine:
            if not first <= k <= last:
                stack = pieces[k].stack
                pieces[k].stack = stack[: stack.index(eid)]


def carry(run: Run, translation: str, alignment: Alignment | None) -> None:
    """Put ``translation`` in the document in place of the run, with the run's markup."""
    pieces = targets(run, translation.split(), alignment)
    contiguous(pieces, len(run.elements))
    alive = {eid for piece in pieces for eid in piece.stack}
    orphan = [eid not in alive for eid in range(len(run.elements))]
    owned = [any(orphan[eid] for eid in stack) for stack in run.atom_stacks]
    copied = _copies(run, pieces, owned)
    after, before = _seat_riders(run, pieces, _riders(run, orphan, owned, copied))
    rewrite(run, pieces, copied, after, before)


def _riders(
    run: Run, orphan: list[bool], owned: list[bool], copied: list[int | None]
) -> list[tuple[str, int, tuple[int, int]]]:
    """What rides on a word: the atoms not in a gap given back nor in an orphan, and the
    outermost orphans; each with where it stood in the source (gap, position)."""
    claimed = {aid for g in copied if g is not None for kind, aid in run.gaps[g] if kind == "atom"}
    riders = [("atom", aid, run.placed[aid]) for aid in range(len(run.atoms))]
    riders = [r for r in riders if not owned[r[1]] and r[1] not in claimed]
    for eid, is_orphan in enumerate(orphan):
        parent = run.parents[eid]
        if is_orphan and (parent < 0 or not orphan[parent]):
            riders.append(("orphan", eid, run.opened[eid]))
    return sorted(riders, key=lambda rider: rider[2])


def _seat_riders(
    run: Run, pieces: list[Target], riders: list[tuple[str, int, tuple[int, int]]]
) -> tuple[list[list[Rider]], list[list[Rider]]]:
    """Per target gap, the riders after the piece before it and before the piece after it."""
    seats = _Seats(run, pieces)
    after: list[list[Rider]] = [[] for _ in range(len(pieces) + 1)]
    before: list[list[Rider]] = [[] for _ in range(len(pieces) + 1)]
    for kind, xid, (gap, _) in riders:
        g, is_after = seats.seat(gap)
        stack = run.atom_stacks[xid] if kind == "atom" else run.stack_of(xid)
        (after if is_after else before)[g].append((kind, xid, stack))
    return after, before


def _copies(run: Run, pieces: list[Target], owned: list[bool]) -> list[int | None]:
    """Per target gap, the source gap it gives back exactly, if any (step 4)."""
    n, copied, used = len(run.pieces), [], set()
    for g in range(len(pieces) + 1):
        left = pieces[g - 1].last if g > 0 else -1
        right = pieces[g].first if g < len(pieces) else n
        same = (
            left is not None
            and right is not None
            and right == left + 1
            and right not in used
            and (g == 0 or pieces[g - 1].stack == run.pieces[left].stack)
            and (g == len(pieces) or pieces[g].stack == run.pieces[right].stack)
            and not any(kind == "atom" and owned[aid] for kind, aid in run.gaps[right])
        )
        copied.append(right if same else None)
        if same:
            used.add(right)
    return copied


class _Seats:
    """Where an atom anchored in a source gap sits in the translation (step 5)."""

    def __init__(self, run: Run, pieces: list[Target]) -> None:
        self.run = run
        self.count = len(pieces)
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        for k, piece in enumerate(pieces):
            if piece.source is not None:
                self.first.setdefault(piece.source, k)
                self.last[piece.source] = k

    def seat(self, gap: int) -> tuple[int, bool]:
        """(target gap, whether it rides on the piece before it) for source gap ``gap``."""
        if not self.first:  # no source word has a translation: all at the start
            return 0, self.count == 0
        pieces, n = self.run.pieces, len(self.run.words)
        inner = 0 < gap < len(pieces) and pieces[gap - 1].word == pieces[gap].word
        right = pieces[gap].word if gap < len(pieces) else n
        right += 1 if inner else 0
        for d in range(n + 1):
            sides = [(right + d, False), (right - 1 - d, True)]
            for word, is_after in reversed(sides) if inner else sides:
                if word in self.first:
                    return (self.last[word] + 1, True) if is_after else (self.first[word], False)
        raise AssertionError("unreachable: some word has a translation")
