"""Write a segment's translation back into the document tree, tags opening where stacks change.

:mod:`mtkit.text.carry` decides which stack each piece of the translation takes, which source
gaps come back exactly and where each atom rides; the :class:`Writer` puts it into the tree with
the source's own lxml nodes, moved (each element opened once, each atom put once), so the result
is well-formed and lxml writes the entities and quotes.
"""

from __future__ import annotations

from dataclasses import dataclass

from mtkit.text.inline import Event, Node, Run, Stack

Rider = tuple[str, int, Stack]  # ("atom" or "orphan", its id, the elements around it)


@dataclass
class Target:
    """A piece of the translation: a whole target word, or one piece of an unchanged word."""

    text: str
    stack: Stack
    word: int  # which word of the translation
    source: int | None  # the source word it comes from (None: unaligned)
    first: int | None  # the source pieces at its left and right edges (None: unaligned)
    last: int | None


def common(a: Stack, b: Stack) -> int:
    """The length of the common prefix of two stacks."""
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def rewrite(
    run: Run,
    pieces: list[Target],
    copied: list[int | None],
    after: list[list[Rider]],
    before: list[list[Rider]],
) -> None:
    """Put ``pieces`` in the tree in place of the run: per target gap ``g``, the source gap
    ``copied[g]`` as it was (or a space), with the riders ``after[g]`` and ``before[g]``."""
    _detach(run)
    holder = run.container.makeelement("mtkit-holder", {})
    run.container.append(holder)  # in the same document: namespaces stay as they were
    writer = Writer(run, holder)
    for g in range(len(pieces) + 1):
        writer.gap(g, pieces, copied[g], after[g], before[g])
        if g < len(pieces):
            writer.move(pieces[g].stack)
            writer.text(pieces[g].text)
    writer.move(())
    _splice(run, holder)


def _detach(run: Run) -> None:
    """Take the run's nodes out of the tree, each emptied of what the run will put back."""
    for element in run.elements:
        element.text = None
        for child in list(element):
            element.remove(child)
    for member in run.members:
        run.container.remove(member)
    for node in [*run.elements, *run.atoms]:
        node.tail = None
    if run.lead is None:
        run.container.text = None
    else:
        run.lead.tail = None


def _splice(run: Run, holder: Node) -> None:
    """Move what was written into ``holder`` to where the run was."""
    container = run.container
    at = 0 if run.lead is None else container.index(run.lead) + 1
    for node in list(holder):
        container.insert(at, node)
        at += 1
    if run.lead is None:
        container.text = holder.text
    else:
        run.lead.tail = holder.text
    container.remove(holder)


class Writer:
    """Writes text, elements and atoms into ``holder``, opening and closing elements as the
    stack changes; an element opens at most once (the run resolution sees to it)."""

    def __init__(self, run: Run, holder: Node) -> None:
        self.run = run
        self.path = [holder]
        self.stack: list[int] = []
        self.opened: set[int] = set()

    def text(self, text: str) -> None:
        if not text:
            return
        parent = self.path[-1]
        if len(parent):
            parent[-1].tail = (parent[-1].tail or "") + text
        else:
            parent.text = (parent.text or "") + text

    def put(self, node: Node) -> None:
        self.path[-1].append(node)

    def open(self, eid: int) -> None:
        if eid in self.opened:
            raise AssertionError(f"element {eid} opened twice")
        self.opened.add(eid)
        self.put(self.run.elements[eid])
        self.path.append(self.run.elements[eid])
        self.stack.append(eid)

    def close(self) -> None:
        self.stack.pop()
        self.path.pop()

    def move(self, stack: Stack) -> None:
        """Close and open elements until ``stack`` is open."""
        keep = common(tuple(self.stack), stack)
        while len(self.stack) > keep:
            self.close()
        for eid in stack[keep:]:
            self.open(eid)

    def event(self, event: Event) -> None:
        kind, value = event
        if kind == "text":
            self.text(value)
        elif kind == "open":
            self.open(value)
        elif kind == "close":
            self.close()
        else:
            self.put(self.run.atoms[value])

    def rider(self, kind: str, xid: int) -> None:
        self.put(self.run.atoms[xid] if kind == "atom" else self.orphan(xid))

    def orphan(self, eid: int) -> Node:
        """An element with none of its words translated: its markup, no text."""
        element = self.run.elements[eid]
        for kind, xid in self.run.contents[eid]:
            element.append(self.orphan(xid) if kind == "element" else self.run.atoms[xid])
        return element

    def gap(
        self,
        g: int,
        pieces: list[Target],
        copy: int | None,
        after: list[Rider],
        before: list[Rider],
    ) -> None:
        """Target gap ``g``: the source gap ``copy`` as it was, or one space (or the segment's
        edge whitespace), with the atoms riding on the pieces either side."""
        left = tuple(self.stack)
        right = pieces[g].stack if g < len(pieces) else ()
        if copy is not None:
            for kind, xid, _ in after:
                self.rider(kind, xid)
            for event in self.run.gaps[copy]:
                self.event(event)
            for kind, xid, _ in before:
                self.rider(kind, xid)
            return
        lead, trail = edges(self.run.gaps)
        if g == 0:
            self.text(lead)
        shared = common(left, right)
        level = len(left)
        for kind, xid, stack in after:  # going out of the piece before: deeper first
            level = min(level, max(shared, common(stack, left)))
            self.move(left[:level])
            self.rider(kind, xid)
        self.move(right[:shared])
        if 0 < g < len(pieces):
            self.text(" " if pieces[g - 1].word != pieces[g].word else "")
        level = shared
        for kind, xid, stack in before:  # going into the piece after: shallower first
            level = max(level, common(stack, right))
            self.move(right[:level])
            self.rider(kind, xid)
        if g == len(pieces):
            self.text(trail)


def edges(gaps: list[list[Event]]) -> tuple[str, str]:
    """A segment's leading and trailing whitespace: the whitespace its first gap starts with and
    its last gap ends with (``<p>\n  <b>Hi</b>\n</p>``: "\n  " and "\n")."""

    def spaces(events: list[Event]) -> str:
        out = []
        for kind, value in events:
            if kind != "text":
                break
            out.append(value)
        return "".join(out)

    return spaces(gaps[0]), spaces(gaps[-1][::-1])[::-1]
