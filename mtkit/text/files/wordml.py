"""A Word paragraph as a small HTML fragment whose inline elements stand for its runs, and the
paragraph rebuilt from the fragment's translation: run formatting carried by the word
alignments exactly as HTML's inline tags are (:mod:`mtkit.text.markup`, Bergamot's model).

A paragraph (``w:p``) holds runs (``w:r``: a formatting, ``w:rPr``, and text), containers
of runs (hyperlinks, content controls, insertions, ...) and things that are not text
(bookmarks, drawings, fields, notes' references). :meth:`Paragraph.read` writes it as HTML:

- a *format span* ``<span id="fK">`` for each stretch of neighbouring runs with one formatting
  (Word splits runs for spell-checking and revision marks: such runs are merged), except the
  paragraph's *base* formatting, the one with the most characters, whose text is left bare; a
  run's ``w:t`` is its text, a ``w:tab`` a tab;
- a *container* ``<span id="cK">`` around the items of a hyperlink, ``w:sdt``, ``w:ins``, ...
  (their properties, ``w:sdtPr`` and the like, stay in them, first);
- an *atom* ``<img id="aK">`` for anything else: a bookmark, a drawing or a note reference
  inside a run, a whole complex field (``w:fldChar`` begin to end, its instruction and its
  result, kept together so that its parts stay in order), a deletion; and ``<br id="aK">`` for a
  line, column or page break (``w:br``, ``w:cr``), which like HTML's ``<br>`` ends a sentence
  and stays where it was.

Example: ``Hello `` then ``big`` in bold then `` world`` is ``<p>Hello <span id="f0">big</span>
world</p>``; its translation ``<p>Hallo <span id="f0">große</span> Welt</p>`` becomes three
runs again: base, bold, base.

:meth:`Paragraph.rebuild` walks the translated fragment (lxml's HTML parser reads it back) and
writes new runs: text in a format span takes that span's ``w:rPr`` (a copy), bare text the base
formatting, containers and atoms come back as the very nodes they stood for (moved, so a text
box's paragraphs, translated on their own, move with their drawing). The text layer keeps every
element of the fragment exactly once, so every formatting, container and atom is in the
result; words that a translation moves out of their span take the base formatting.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

import lxml.html
from lxml import etree

Node = Any  # an lxml element of a Word part
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def w(name: str) -> str:
    """A WordprocessingML tag in lxml's ``{namespace}name`` form."""
    return f"{{{W}}}{name}"


NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")  # not allowed in XML text
RUN, TEXT, TAB, FIELD = w("r"), w("t"), w("tab"), w("fldChar")
BREAKS = frozenset({w("br"), w("cr")})
CONTAINERS = frozenset(
    w(name)
    for name in (
        "hyperlink",
        "ins",
        "moveTo",
        "smartTag",
        "customXml",
        "fldSimple",
        "dir",
        "bdo",
        "sdt",
        "sdtContent",
    )
)
# properties: stay first in their element, never moved
HEADS = frozenset(
    w(name) for name in ("pPr", "rPr", "sdtPr", "sdtEndPr", "smartTagPr", "customXmlPr")
)


@dataclass
class Atom:
    """Nodes kept whole; ``run``: each was inside a run, and goes back in a new run with that
    run's formatting ``rpr`` (None: none)."""

    nodes: list[Node]
    run: bool = False
    rpr: Node | None = None


Item = Any  # a text run (a w:r element), a Container or an Atom


@dataclass
class Container:
    """A container of runs (a hyperlink, a content control, ...) and its items."""

    element: Node
    items: list[Item]


@dataclass
class Paragraph:
    """A ``w:p`` read as an HTML fragment (``html``), and what its ids stand for."""

    element: Node
    html: str = ""
    words: bool = False  # some text to translate
    base: Node | None = None  # the w:rPr of bare text
    formats: list[Node | None] = field(default_factory=list)  # fK -> its w:rPr
    containers: list[Node] = field(default_factory=list)  # cK
    atoms: list[Atom] = field(default_factory=list)  # aK

    @classmethod
    def read(cls, element: Node) -> Paragraph:
        """``element`` as a fragment; its base formatting: the one with the most characters."""
        paragraph = cls(element)
        items = _items(element)
        sizes: Counter[bytes] = Counter()
        firsts: dict[bytes, Node | None] = {}
        for run in _runs(items):
            key, rpr = _format(run)
            sizes[key] += sum(len(t.text or "") for t in run.iter(TEXT))
            firsts.setdefault(key, rpr)
        base = max(sizes, key=sizes.__getitem__) if sizes else b""
        paragraph.base = firsts.get(base)
        out = ["<p>"]
        paragraph._write(items, base, out)
        paragraph.html = "".join(out) + "</p>"
        return paragraph

    def _write(self, items: list[Item], base: bytes, out: list[str]) -> None:
        """Items as HTML: neighbouring runs of one formatting in one span."""
        opened: bytes | None = None  # the formatting of the open format span
        for item in items:
            key, rpr = (None, None) if isinstance(item, (Atom, Container)) else _format(item)
            if opened is not None and key != opened:
                out.append("</span>")
                opened = None
            if isinstance(item, Atom):
                out.append(f'<img id="a{self._atom(item)}">')
            elif isinstance(item, Container):
                self.containers.append(item.element)
                out.append(f'<span id="c{len(self.containers) - 1}">')
                self._write(item.items, base, out)
                out.append("</span>")
            else:
                if key != base and opened is None:
                    self.formats.append(rpr)
                    out.append(f'<span id="f{len(self.formats) - 1}">')
                    opened = key
                self._run(item, rpr, out)
        if opened is not None:
            out.append("</span>")

    def _run(self, run: Node, rpr: Node | None, out: list[str]) -> None:
        for node in run:
            if node.tag == TEXT:
                out.append(html.escape(node.text or "", quote=False))
                self.words = self.words or bool((node.text or "").strip())
            elif node.tag == TAB:
                out.append("\t")
            elif node.tag in BREAKS:
                out.append(f'<br id="a{self._atom(Atom([node], True, rpr))}">')
            elif node.tag != w("rPr"):
                out.append(f'<img id="a{self._atom(Atom([node], True, rpr))}">')

    def _atom(self, atom: Atom) -> int:
        self.atoms.append(atom)
        return len(self.atoms) - 1

    def rebuild(self, translation: str) -> None:
        """The paragraph's content replaced by ``translation`` (the translated fragment)."""
        fragment = lxml.html.fragment_fromstring(translation, create_parent="div")
        for holder in (self.element, *self.containers):
            for child in list(holder):
                if child.tag not in HEADS:
                    holder.remove(child)
        writer = _Writer(self)
        writer.emit(self.element, fragment, self.base)
        writer.flush()
        for number, atom in enumerate(self.atoms):  # none is lost, whatever came back
            if number not in writer.placed:
                writer.atom(self.element, atom)


def _items(parent: Node) -> list[Item]:
    """A paragraph's (a container's) content: text runs, (container, its items) and atoms; a
    complex field, begin to end, is one atom."""
    out: list[Item] = []
    field_nodes: list[Node] = []
    depth = 0
    for child in parent:
        if child.tag in HEADS:
            continue
        marks = [mark.get(w("fldCharType")) for mark in child.iter(FIELD)]
        if depth or "begin" in marks:
            field_nodes.append(child)
            for mark in marks:
                depth = max(depth + {"begin": 1, "end": -1}.get(mark, 0), 0)
            if not depth:
                out.append(Atom(field_nodes))
                field_nodes = []
        elif child.tag == RUN and _is_text(child):
            out.append(child)
        elif child.tag in CONTAINERS:
            out.append(Container(child, _items(child)))
        else:
            out.append(Atom([child]))
    if field_nodes:  # a field that ends in a later paragraph
        out.append(Atom(field_nodes))
    return out


def _runs(items: list[Item]) -> list[Node]:
    """The text runs among ``items``, containers' included, in order."""
    out: list[Node] = []
    for item in items:
        if isinstance(item, Container):
            out += _runs(item.items)
        elif not isinstance(item, Atom):
            out.append(item)
    return out


def _is_text(run: Node) -> bool:
    return any(node.tag == TEXT or node.tag == TAB or node.tag in BREAKS for node in run)


def _format(run: Node) -> tuple[bytes, Node | None]:
    """A run's formatting: a key (its w:rPr written out) and the w:rPr (None: none)."""
    rpr = run.find(w("rPr"))
    return (b"" if rpr is None else etree.tostring(rpr)), rpr


class _Writer:
    """Writes a translated fragment into a paragraph: text into runs, nodes moved back."""

    def __init__(self, paragraph: Paragraph) -> None:
        self.paragraph = paragraph
        self.placed: set[int] = set()
        self.pending: list[str] = []
        self.where: tuple[Node, Node | None] | None = None  # (parent, w:rPr) of pending text

    def emit(self, target: Node, node: Node, rpr: Node | None) -> None:
        """``node``'s text and children into ``target``, bare text with formatting ``rpr``."""
        self.text(target, node.text, rpr)
        for child in node:
            kind, number = _ident(child)
            if kind == "f" and number < len(self.paragraph.formats):
                self.emit(target, child, self.paragraph.formats[number])
            elif kind == "c" and number < len(self.paragraph.containers):
                container = self.paragraph.containers[number]
                self.flush()
                target.append(container)
                self.emit(container, child, rpr)
                self.flush()
            elif kind == "a" and number < len(self.paragraph.atoms) and number not in self.placed:
                self.atom(target, self.paragraph.atoms[number])
                self.placed.add(number)
            elif isinstance(child.tag, str):
                self.emit(target, child, rpr)
            self.text(target, child.tail, rpr)

    def text(self, target: Node, text: str | None, rpr: Node | None) -> None:
        if not text:
            return
        where = (target, rpr)
        if self.where is None or self.where[0] is not target or self.where[1] is not rpr:
            self.flush()
            self.where = where
        self.pending.append(text)

    def flush(self) -> None:
        if self.pending and self.where is not None:
            target, rpr = self.where
            run = _new_run(rpr)
            run.text = NOT_XML.sub("", "".join(self.pending))
            target.append(run)
        self.pending, self.where = [], None

    def atom(self, target: Node, atom: Atom) -> None:
        self.flush()
        for node in atom.nodes:
            if atom.run:
                run = _new_run(atom.rpr)
                run.append(node)
                node = run
            target.append(node)


def _ident(element: Node) -> tuple[str, int]:
    """A fragment element's id: ("f", 3) for ``id="f3"``; ("", -1) for anything else."""
    ident = element.get("id", "") if isinstance(element.tag, str) else ""
    if len(ident) > 1 and ident[0] in "fca" and ident[1:].isdigit():
        return ident[0], int(ident[1:])
    return "", -1


def _new_run(rpr: Node | None) -> Node:
    """An empty ``w:r`` (python-docx's element class) with a copy of ``rpr``."""
    from docx.oxml import OxmlElement

    run = OxmlElement("w:r")
    if rpr is not None:
        run.append(deepcopy(rpr))
    return run
