"""Translate HTML and XML documents: the text between the tags, with the tags carried along.

Bergamot's HTML model (``src/translator/html.h``): tags are a stack over text, moved by the
word alignment. A well-kept parser does the parsing (lxml: ``lxml.html`` for HTML, repairing
broken markup as browsers do; ``lxml.etree`` for XML, with entities left unexpanded, no DTD
loaded and no network), and lxml writes the result, so it is well-formed and escaped.

Segments. Elements that break segments (``p``, ``li``, ``td``, ``h1``, ``br``, ... the tables
in :mod:`mtkit.text.tags`) are containers: the text between two breaks in one container is a
segment (an :class:`~mtkit.text.inline.Run`), translated on its own. XML has no such table: an
element is inline when its parent holds text of its own (mixed content), and a container when
it does not; an HTML tag in none of the tables is classified the same way, and an inline element
holding a block (``<a><div>..</div></a>``) is a container too. What is not translated (``script``,
``style``, ``code``, ``pre``, ``translate="no"``, ``class="notranslate"``) is kept byte for byte:
as a container it is skipped whole, inside a segment it is an atom riding on a word. Attribute
values are never translated.

Tags. Inline elements (``b``, ``a``, ``span``, ...) are carried to the words of the translation
aligned to the words they wrapped, every element exactly once (:mod:`mtkit.text.carry` says how
words dropped or reordered are dealt with); comments, void elements and entity references ride
on their neighbouring word. The output has the same elements with the same attributes as the
parsed input (after lxml's repairs of broken HTML).

Whitespace. A segment's words are handed to the translator joined by single spaces (a line break
inside a paragraph is no sentence break); the whitespace between blocks is not touched, and a
segment's leading and trailing whitespace stays at its edges. Text with no tags is a segment
like any other and comes back escaped (``Tom & Jerry`` as ``Tom &amp; Jerry``).

Entities. lxml decodes HTML's entities; the output escapes ``&``, ``<``, ``>`` in text and
quotes in attributes, and writes every other character as itself (``&nbsp;`` comes back as
U+00A0, ``&#x1F600;`` as the emoji). In XML, references to entities declared in the document's
DTD stay references (a billion laughs in text does not expand), and a document whose attributes
would expand one is refused.

Documents. An HTML fragment (as Mastodon sends: ``<p>Hello <a href="..">@bob</a></p>``) comes
back as a fragment, a document (``<!DOCTYPE``, ``<html>``) as a document, with its doctype if it
had one. An HTML fragment is what lxml finds in ``<body>`` (a stray ``<body>`` tag in it loses
its attributes). An XML declaration is written back (as UTF-8) if the input had one, an XHTML
document's declaration as it was; a leading byte-order mark is kept; a document with nothing in
it (empty, blank, only a doctype) comes back as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import lxml.html
from lxml import etree

from mtkit.engines.alignment import Alignment
from mtkit.errors import MtkitError
from mtkit.text.carry import carry
from mtkit.text.inline import Node, Run, html_name, read_run, untranslated
from mtkit.text.tags import BLOCK, INLINE, VERBATIM, VOID

KINDS = ("html", "xml")
INLINE_LIKE = INLINE | VOID | VERBATIM  # HTML tags that never break a segment by themselves
BOM = "\ufeff"
XML_DECLARATION = "<?xml"
OPENED = ("", " ", "\t", "\r", "\n", "\f", ">", "/")  # what may follow "<html" in its tag

__all__ = [
    "KINDS",
    "Document",
    "Marked",
    "find_runs",
    "normalised",
    "parse",
    "read_markup",
]


@dataclass
class Document:
    """A parsed document and what it takes to write it back as it came."""

    kind: str  # "html", "xml"
    root: Node | None  # the element whose content is translated (None: nothing to translate)
    text: str = ""  # the document itself, when there is nothing to translate
    prefix: str = ""  # a byte-order mark, an XHTML document's XML declaration: kept as they are
    whole: bool = False  # HTML: a whole document (not a fragment in <body>)
    prolog: bool = False  # HTML: with a doctype; XML: with an XML declaration
    standalone: bool | None = None  # XML: the declaration's standalone="yes|no", if it had one

    def serialize(self) -> str:
        if self.root is None:
            return self.text
        if self.kind == "xml":
            return self.prefix + _xml_out(self.root, self.prolog, self.standalone)
        return self.prefix + (_html_out(self.root, self.prolog) if self.whole else _body(self.root))


@dataclass
class Marked:
    """Documents parsed, and their segments in document order: the plain texts to translate."""

    documents: list[Document]
    runs: list[Run]

    @property
    def segments(self) -> list[str]:
        return [run.text for run in self.runs]

    def written(self, results: Sequence[tuple[str, Alignment | None]]) -> list[str]:
        """The documents with every segment's translation (its text and the alignment of the
        segment's whitespace words to its words; None where the engine gives none) in place
        of the segment, the markup carried along; once only (the documents are changed)."""
        if len(results) != len(self.runs):
            raise ValueError(f"{len(results)} translations for {len(self.runs)} segments")
        for run, (translation, alignment) in zip(self.runs, results, strict=True):
            carry(run, translation, alignment)
        return [document.serialize() for document in self.documents]


def read_markup(documents: Sequence[str], kind: str) -> Marked:
    """``documents`` (``kind`` "html" or "xml") parsed and their segments found."""
    parsed = [parse(document, kind, number) for number, document in enumerate(documents, 1)]
    return Marked(parsed, [run for document in parsed for run in find_runs(document)])


def normalised(document: str, kind: str) -> str:
    """``document`` parsed and written back untranslated: what an identity translation gives."""
    return parse(document, kind, 1).serialize()


def parse(text: str, kind: str, number: int) -> Document:
    """Document ``number`` (for messages) parsed as ``kind``."""
    if kind not in KINDS:
        raise MtkitError(f"markup format {kind!r}: expected one of {', '.join(KINDS)}")
    prefix = BOM if text.startswith(BOM) else ""
    body = text[len(prefix) :]
    if not body.strip():
        return Document(kind, None, text)
    declared = body.startswith(XML_DECLARATION) and body[5:6].isspace() and "?>" in body
    if kind == "xml":
        root = _xml_in(body, number)
        alone = declared and "standalone" in body[: body.find("?>")]
        standalone = root.getroottree().docinfo.standalone if alone else None
        return Document(kind, root, prefix=prefix, prolog=declared, standalone=standalone)
    if declared:  # XHTML's XML declaration, which HTML parsers read as a comment: kept as it is
        end = body.index("?>") + 2
        end += len(body[end:]) - len(body[end:].lstrip())
        prefix, body = prefix + body[:end], body[end:]
    start = _start(body)
    whole = start.startswith("<!doctype") or start.startswith("<html") and start[5:6] in OPENED
    try:
        if whole:
            root = lxml.html.document_fromstring(body)
            return Document(kind, root, prefix=prefix, whole=True, prolog=start[:2] == "<!")
        wrapped = lxml.html.document_fromstring(f"<html><body>{body}</body></html>")
    except etree.ParserError:  # a document with nothing in it ("<!DOCTYPE html>")
        return Document(kind, None, text)
    return Document(kind, wrapped.body, prefix=prefix)


def _start(text: str) -> str:
    """The document's first tag in lower case, after whitespace, comments and ``<?..?>``."""
    rest = text.lstrip()
    while rest.startswith(("<!--", "<?")):
        close = "-->" if rest.startswith("<!--") else ">"
        end = rest.find(close, 2)
        if end < 0:
            return ""
        rest = rest[end + len(close) :].lstrip()
    return rest[:9].lower()


def _xml_in(text: str, number: int) -> Node:
    parser = etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        encoding="utf-8",
    )
    try:
        return etree.fromstring(text.encode("utf-8"), parser)
    except etree.XMLSyntaxError as err:
        raise MtkitError(f"document {number}: not well-formed XML: {_one_line(err)}") from None


def _one_line(err: Exception) -> str:
    """An lxml error on one line."""
    return " ".join(str(err).split()) or type(err).__name__


def _xml_out(root: Node, declaration: bool, standalone: bool | None) -> str:
    tree = root.getroottree()
    if not declaration:
        return etree.tostring(tree, encoding="unicode")
    data = etree.tostring(tree, encoding="UTF-8", xml_declaration=True, standalone=standalone)
    return data.decode("utf-8")


def _html_out(root: Node, doctype: bool) -> str:
    """A whole HTML document, with the doctype only if it had one (lxml adds HTML 4's)."""
    if doctype:
        return etree.tostring(root.getroottree(), method="html", encoding="unicode")
    nodes = [*reversed(list(root.itersiblings(preceding=True))), root, *root.itersiblings()]
    return "".join(
        etree.tostring(node, method="html", encoding="unicode", with_tail=False) for node in nodes
    )


def _body(body: Node) -> str:
    """A fragment: what lxml writes between ``<body>`` and ``</body>``."""
    html = etree.tostring(body, method="html", encoding="unicode", with_tail=False)
    return html[html.index(">") + 1 : html.rindex("<")]  # lxml writes ">" in attributes as &gt;


def find_runs(document: Document) -> list[Run]:
    """The document's segments with words in them, in document order."""
    if document.root is None:
        return []
    html = document.kind == "html"
    runs: list[Run] = []
    _container(document.root, html, _holding_blocks(document.root, html), runs)
    return runs


def _holding_blocks(root: Node, html: bool) -> set[Node]:
    """The elements with a block element somewhere inside them."""
    found: set[Node] = set()
    for element in root.iter():
        if html_name(element, html) in BLOCK:
            for ancestor in element.iterancestors():
                if ancestor in found:
                    break
                found.add(ancestor)
    return found


def _container(element: Node, html: bool, holding: set[Node], runs: list[Run]) -> None:
    """The segments of a container element and of the containers inside it."""
    if untranslated(element, html):
        return
    mixed = _has_text(element)
    lead, members = None, []
    for child in element:
        if isinstance(child.tag, str) and _breaks(child, html, mixed, holding):
            _add(read_run(element, lead, members, html), runs)
            _container(child, html, holding, runs)
            lead, members = child, []
        else:
            members.append(child)
    _add(read_run(element, lead, members, html), runs)


def _add(run: Run, runs: list[Run]) -> None:
    if run.words:
        runs.append(run)


def _has_text(element: Node) -> bool:
    """Whether an element holds text of its own (mixed content), not only in its children."""
    return any(text and not text.isspace() for text in [element.text, *(c.tail for c in element)])


def _breaks(child: Node, html: bool, mixed: bool, holding: set[Node]) -> bool:
    """Whether a child element breaks its parent's segments (and is a container itself)."""
    name = html_name(child, html)
    if name in BLOCK or child in holding:
        return True
    return name not in INLINE_LIKE and not mixed
