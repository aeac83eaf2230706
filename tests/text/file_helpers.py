"""What the file tests share: a word tokenizer and fake translators for the text layer, Word
documents built with python-docx (formatting, a table, a hyperlink, a field, a picture, a
header and a footer), subtitles, and crafted hostile files."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from typing import Any

from mtkit.engines.base import Translation

SRT = (
    "1\n00:00:01,000 --> 00:00:02,500\nA man runs on the street.\n\n"
    "2\n00:00:03,000 --> 00:00:05,000\n<i>I went to the\nstore yesterday.</i>\n\n"
    "3\n00:00:05,100 --> 00:00:07,000  X1:10 X2:20\n- Hello there.\n- Hi, how are you?\n\n"
    "4\n00:00:08,000 --> 00:00:09,000\n{\\an8}Up here & 2 > 1\n"
)


class WordTokenizer:
    """A tokenizer whose pieces are whitespace words (what the text layer asks of one)."""

    tags: tuple[str, ...] = ()

    def encode(self, lines: list[str]) -> list[list[str]]:
        return [line.split() for line in lines]

    def encode_one(self, line: str) -> list[str]:
        return line.split()


class Fake:
    """Units translated by ``how`` ("upper": upper case; "reverse": words reversed;
    "identity"), with their word alignments; every call recorded."""

    def __init__(self, how: str = "upper") -> None:
        self.how, self.calls = how, []

    def __call__(self, lines: list[str], numbers: list[int]) -> list[list[Translation]]:
        self.calls.append(lines)
        return [[self.one(line)] if line.strip() else [] for line in lines]

    def one(self, line: str) -> Translation:
        words = line.split()
        n = len(words)
        if self.how == "reverse":
            pairs = tuple((i, n - 1 - i) for i in range(n))
            return Translation(" ".join(reversed(words)), 0.0, 0.0, n, alignment=pairs)
        text = line if self.how == "identity" else line.upper()
        return Translation(text, 0.0, 0.0, n, alignment=tuple((i, i) for i in range(n)))


def png() -> bytes:
    """A 1x1 PNG image."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
        + chunk(b"IEND", b"")
    )


def _element(tag: str, text: str | None = None, **attributes: str) -> Any:
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    element = OxmlElement(tag)
    for key, value in attributes.items():
        element.set(qn(key.replace("_", ":", 1)), value)
    if text is not None:
        element.text = text
    return element


def add_hyperlink(paragraph: Any, text: str, url: str) -> None:
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml.ns import qn

    link = _element("w:hyperlink")
    link.set(qn("r:id"), paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, True))
    run = _element("w:r")
    properties = _element("w:rPr")
    properties.append(_element("w:u", w_val="single"))
    run.append(properties)
    run.append(_element("w:t", text))
    link.append(run)
    paragraph._p.append(link)


def add_page_field(paragraph: Any) -> None:
    """A complex field: ``PAGE``, its result ``1``."""
    for kind, child in (
        ("begin", None),
        ("", _element("w:instrText", " PAGE ")),
        ("separate", None),
        ("", _element("w:t", "1")),
        ("end", None),
    ):
        run = _element("w:r")
        run.append(child if child is not None else _element("w:fldChar", w_fldCharType=kind))
        paragraph._p.append(run)


def build_docx() -> bytes:
    """A document with formatted runs, a tab, a line break, a hyperlink, a picture, a table
    (with a nested table), a header with a field and a footer."""
    import docx
    from docx.shared import Pt, RGBColor

    document = docx.Document()
    document.add_heading("The big title", level=1)
    p = document.add_paragraph("Hello ")
    bold = p.add_run("big")
    bold.bold = True
    p.add_run(" world. A second")
    p.add_run(" sentence")  # same formatting as the run before: merged
    red = p.add_run(" in red.")
    red.font.color.rgb, red.font.size = RGBColor(0xFF, 0, 0), Pt(14)
    p = document.add_paragraph("Column\tafter a tab")
    p.add_run().add_break()
    p.add_run("next line, ").italic = True
    add_hyperlink(p, "the link", "https://example.org/a?b=1")
    p = document.add_paragraph("See ")
    p.add_run().add_picture(io.BytesIO(png()))
    p.add_run(" the picture.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "first cell"
    table.cell(0, 1).paragraphs[0].add_run("second cell").underline = True
    table.cell(1, 0).text = ""
    inner = table.cell(1, 1).add_table(rows=1, cols=1)
    inner.cell(0, 0).text = "nested cell"
    document.add_paragraph("")
    document.add_paragraph("The end.")
    section = document.sections[0]
    section.header.paragraphs[0].text = "Page "
    add_page_field(section.header.paragraphs[0])
    section.footer.paragraphs[0].text = "The footer"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def runs(paragraph: Any) -> list[tuple[str, Any, Any, Any, Any, Any]]:
    """A paragraph's runs (hyperlinks' included): text and formatting."""
    from docx.text.run import Run

    found = paragraph._p.xpath("./w:r | ./w:hyperlink/w:r")
    return [
        (
            r.text,
            r.bold,
            r.italic,
            r.underline,
            r.font.size,
            r.font.color.rgb if r.font.color.type else None,
        )
        for r in (Run(element, paragraph) for element in found)
    ]


def rezip(
    data: bytes, change: dict[str, bytes | None], method: int = zipfile.ZIP_DEFLATED, extra: int = 0
) -> bytes:
    """A zip package with members replaced or added (None: removed), and ``extra`` empty
    members more."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        for info in source.infolist():
            if info.filename not in change:
                archive.writestr(info.filename, source.read(info))
        for name, member in change.items():
            if member is not None:
                archive.writestr(name, member)
        for i in range(extra):
            archive.writestr(f"customXml/empty{i}.bin", b"")
    return out.getvalue()


LAUGHS = "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10))
BILLION_LAUGHS = f'<!DOCTYPE w:document [<!ENTITY lol0 "lol">{LAUGHS}]>'
SOME_LAUGHS = BILLION_LAUGHS[: BILLION_LAUGHS.index("<!ENTITY lol4")] + "]>"  # a thousand
EXTERNAL = '<!DOCTYPE w:document [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'


def with_doctype(data: bytes, doctype: str, entity: str) -> bytes:
    """The document with ``doctype`` before its root and ``&entity;`` in its first text."""
    document = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode("utf-8")
    head, _, body = document.partition("?>")
    body = body.replace("<w:t>", f"<w:t>&{entity};", 1)
    return rezip(data, {"word/document.xml": f"{head}?>{doctype}{body}".encode()})


def zip_bomb(data: bytes, megabytes: int = 4) -> bytes:
    """The document with a member of zeros that deflates a thousandfold."""
    return rezip(data, {"word/media/zeros.bin": bytes(megabytes * 2**20)})


TRACKED = (
    '<w:pPr><w:jc w:val="center"/></w:pPr><w:bookmarkStart w:id="0" w:name="start"/>'
    '<w:r><w:t xml:space="preserve">Plain </w:t></w:r><w:proofErr w:type="spellStart"/>'
    '<w:ins w:id="1" w:author="a"><w:r><w:rPr><w:b/></w:rPr><w:t>inserted words</w:t></w:r>'
    '</w:ins><w:del w:id="2" w:author="a"><w:r><w:delText>deleted</w:delText></w:r></w:del>'
    '<w:sdt><w:sdtPr><w:alias w:val="Box"/></w:sdtPr><w:sdtContent><w:r><w:rPr><w:i/></w:rPr>'
    '<w:t xml:space="preserve"> control text</w:t></w:r></w:sdtContent></w:sdt>'
    '<w:smartTag w:uri="u" w:element="place"><w:smartTagPr><w:attr w:name="n" w:val="v"/>'
    '</w:smartTagPr><w:r><w:t xml:space="preserve"> Paris</w:t></w:r></w:smartTag>'
    '<w:bookmarkEnd w:id="0"/><w:r><w:t xml:space="preserve"> and </w:t></w:r>'
    '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> TOC </w:instrText></w:r>'
    '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>entry one</w:t></w:r>'
)  # a paragraph with revisions, a content control, a smart tag, bookmarks, a field's start
FIELD_END = (
    '<w:r><w:t>entry two</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>'
    '<w:r><w:t xml:space="preserve"> after</w:t></w:r>'
)  # the next paragraph: the field's end


def tracked_docx() -> bytes:
    """A document of the paragraphs TRACKED and FIELD_END."""
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    document = docx.Document()
    for content in (FIELD_END, TRACKED):
        document.element.body.insert(0, parse_xml(f"<w:p {nsdecls('w')}>{content}</w:p>"))
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


FOOTNOTES = (
    '<w:footnotes xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
    '<w:footnote w:id="1"><w:p><w:r><w:t>A note here.</w:t></w:r></w:p></w:footnote>'
    "</w:footnotes>"
)


TEXT_BOX = (
    '<w:r><w:pict><v:shape xmlns:v="urn:schemas-microsoft-com:vml"><v:textbox><w:txbxContent>'
    "<w:p><w:r><w:t>boxed text</w:t></w:r></w:p></w:txbxContent></v:textbox></v:shape></w:pict>"
    "</w:r>"
)


def notes_docx() -> bytes:
    """A paragraph with a comment and a text box, and a footnote."""
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    document = docx.Document()
    paragraph = document.add_paragraph("Hello there")
    document.add_comment(paragraph.runs, text="A comment here", author="me")
    paragraph._p.append(parse_xml(TEXT_BOX.replace("<w:r>", f"<w:r {nsdecls('w')}>", 1)))
    paragraph.add_run(" after the box")
    out = io.BytesIO()
    document.save(out)
    return with_footnotes(out.getvalue())


def with_footnotes(data: bytes) -> bytes:
    """The document with a footnotes part (python-docx cannot add one)."""
    source = zipfile.ZipFile(io.BytesIO(data))
    types = (
        source.read("[Content_Types].xml")
        .decode()
        .replace(
            "</Types>",
            (
                '<Override PartName="/word/footnotes.xml" '
                'ContentType="application/vnd.openxmlformats-'
                'officedocument.wordprocessingml.footnotes+xml"/></Types>'
            ),
        )
    )
    rels = (
        source.read("word/_rels/document.xml.rels")
        .decode()
        .replace(
            "</Relationships>",
            (
                '<Relationship Id="rIdNotes" Type="http://schemas.openxmlformats.org/officeDocument/'
                '2006/relationships/footnotes" Target="footnotes.xml"/></Relationships>'
            ),
        )
    )
    return rezip(
        data,
        {
            "[Content_Types].xml": types.encode(),
            "word/_rels/document.xml.rels": rels.encode(),
            "word/footnotes.xml": FOOTNOTES.encode(),
        },
    )
