"""One segment of a marked-up document read as data: its words, and the tags open over them.

A *run* is what lies between two segment breaks inside one container element: a stretch of text
(the container's ``.text``, or the ``.tail`` of the breaking child before it), the inline
children that follow and, after each, its tail. Reading it flattens the tree, as Bergamot's HTML
model (``src/translator/html.h``) does, into text with a stack of open tags over each stretch:

- *pieces*: the stretches of text between spaces and tags, each with its *stack* (the ids of the
  inline elements open over it, outermost first). Pieces with no space between them make one
  word: ``un<b>do</b>`` is the word ``undo`` in two pieces.
- *gaps*: what lies between two pieces (and before the first, after the last: one more gap
  than pieces), in order: whitespace, tags opening and closing, and atoms.
- *atoms*: nodes kept whole, riding on a neighbouring word: void elements (``img``, ``wbr``),
  comments, processing instructions, XML entity references left unexpanded, elements that are
  not translated (``code``, ``translate="no"``, ``class="notranslate"``) and inline elements
  with no word in them (``<a href="..."><img></a>``), each with all its content.

The words, joined with single spaces, are the text handed to the translator: line breaks and
indentation inside a segment become one space each, and a word is a ``str.split()`` word.

Example: ``Hi <b>big <i>world</i></b><img>!`` reads as the words ``Hi``, ``big``, ``world!``,
the pieces ``Hi`` (stack ``()``), ``big`` (``(0,)``), ``world`` (``(0, 1)``) and ``!``
(``()``), elements ``b`` (id 0) and ``i`` (id 1), and the atom ``img`` in the gap before ``!``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from mtkit.text.tags import (
    NO_TRANSLATE_ATTRIBUTE,
    NO_TRANSLATE_CLASS,
    VERBATIM,
    VOID,
    XHTML_NAMESPACE,
)

Node = Any  # an lxml node: element, comment, processing instruction or entity reference
Stack = tuple[int, ...]  # ids of the inline elements open over a piece, outermost first
Event = tuple[str, Any]  # ("text", str), ("open", id), ("close", id) or ("atom", id)


@dataclass(frozen=True)
class Piece:
    """A stretch of text with no space or tag in it, and the inline elements open over it."""

    text: str
    stack: Stack
    word: int  # which word of the run it belongs to


@dataclass
class Run:
    """A segment: its words, the markup over them, and where it sits in the document."""

    container: Node
    lead: Node | None  # the run's first text is the container's .text (None) or lead's .tail
    members: list[Node]  # the container's children that belong to the run
    elements: list[Node] = field(default_factory=list)  # inline elements, in document order
    parents: list[int] = field(default_factory=list)  # per element: its parent's id, -1 at top
    contents: list[list[tuple[str, int]]] = field(default_factory=list)  # per element, in order:
    # ("element", id) and ("atom", id) of its children (text left out)
    opened: list[tuple[int, int]] = field(default_factory=list)  # per element: (gap, position)
    atoms: list[Node] = field(default_factory=list)
    atom_stacks: list[Stack] = field(default_factory=list)  # per atom: the elements around it
    placed: list[tuple[int, int]] = field(default_factory=list)  # per atom: (gap, position)
    pieces: list[Piece] = field(default_factory=list)
    gaps: list[list[Event]] = field(default_factory=list)  # len(pieces) + 1 of them
    words: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """What the translator gets: the words, joined with single spaces."""
        return " ".join(self.words)

    def stack_of(self, eid: int) -> Stack:
        """The elements around element ``eid`` (its ancestors in the run, outermost first)."""
        chain = []
        parent = self.parents[eid]
        while parent >= 0:
            chain.append(parent)
            parent = self.parents[parent]
        return tuple(reversed(chain))


def html_name(node: Node, html: bool) -> str | None:
    """The node's HTML tag name: any element's in HTML, an XHTML element's in XML, else None."""
    tag = node.tag
    if not isinstance(tag, str):
        return None
    if html:
        return tag.lower()
    namespace = "{" + XHTML_NAMESPACE + "}"
    return tag[len(namespace) :] if tag.startswith(namespace) else None


def untranslated(node: Node, html: bool) -> bool:
    """Whether an element is kept as it is: program text, ``translate="no"``, ``notranslate``."""
    if html_name(node, html) in VERBATIM:
        return True
    for key, value in node.attrib.items():  # translate="no" and its:translate="no"
        if key.rpartition("}")[2] == NO_TRANSLATE_ATTRIBUTE and value.strip().lower() == "no":
            return True
    return NO_TRANSLATE_CLASS in (node.get("class") or "").split()


def is_atom(node: Node, html: bool) -> bool:
    """Whether a node inside a segment is kept whole (an inline element with no words is
    found to be one only once read)."""
    if not isinstance(node.tag, str):  # comment, processing instruction, entity reference
        return True
    return html_name(node, html) in VOID or untranslated(node, html)


def read_run(container: Node, lead: Node | None, members: list[Node], html: bool) -> Run:
    """The run made of the text in ``lead`` (``container.text`` when None) and ``members``."""
    run = Run(container, lead, members)
    reader = _Reader(run, html)
    reader.text(container.text if lead is None else lead.tail)
    for member in members:
        reader.node(member, -1)
    run.gaps.append(reader.gap)
    return run


class _Reader:
    """Walks a run's nodes in document order, filling the run's pieces, gaps and tables."""

    def __init__(self, run: Run, html: bool) -> None:
        self.run = run
        self.html = html
        self.stack: list[int] = []
        self.gap: list[Event] = []
        self.spaced = True  # no piece yet, or whitespace since the last one: a new word

    def text(self, text: str | None) -> None:
        for space, chars in groupby(text or "", str.isspace):
            chunk = "".join(chars)
            if space:
                self.gap.append(("text", chunk))
                self.spaced = True
            else:
                self.piece(chunk)

    def piece(self, chunk: str) -> None:
        run = self.run
        run.gaps.append(self.gap)
        self.gap = []
        if self.spaced:
            run.words.append(chunk)
        else:
            run.words[-1] += chunk
        self.spaced = False
        run.pieces.append(Piece(chunk, tuple(self.stack), len(run.words) - 1))

    def node(self, node: Node, parent: int) -> None:
        """A node and its tail; ``parent`` is the id of the inline element it is in (or -1)."""
        if is_atom(node, self.html):
            self.atom(node, parent)
        else:
            self.element(node, parent)
        self.text(node.tail)

    def atom(self, node: Node, parent: int) -> None:
        run = self.run
        aid = len(run.atoms)
        run.atoms.append(node)
        run.atom_stacks.append(tuple(self.stack))
        run.placed.append((len(run.pieces), len(self.gap)))
        self.gap.append(("atom", aid))
        if parent >= 0:
            run.contents[parent].append(("atom", aid))

    def element(self, element: Node, parent: int) -> None:
        """An inline element and what it holds; one with no word in it becomes an atom."""
        run = self.run
        eid, atoms, pieces, at = len(run.elements), len(run.atoms), len(run.pieces), len(self.gap)
        run.elements.append(element)
        run.parents.append(parent)
        run.contents.append([])
        run.opened.append((pieces, at))
        self.gap.append(("open", eid))
        self.stack.append(eid)
        self.text(element.text)
        for child in element:
            self.node(child, eid)
        self.stack.pop()
        self.gap.append(("close", eid))
        if len(run.pieces) > pieces:
            if parent >= 0:
                run.contents[parent].append(("element", eid))
            return
        for table in (run.elements, run.parents, run.contents, run.opened):
            del table[eid:]
        for table in (run.atoms, run.atom_stacks, run.placed):
            del table[atoms:]
        del self.gap[at:]  # no piece since the element opened: still the same gap
        self.atom(element, parent)
