"""Files through the text layer (mtkit.text.files): every format round-trips with a fake
translator, keeping its structure (lines, tags, cues and timings, paragraphs, runs and their
formatting, tables, headers, fields, pictures), and hostile files are refused by content."""

from __future__ import annotations

import io
import re
import zipfile

import docx
import pytest
from docx.oxml.parser import parse_xml
from file_helpers import (
    BILLION_LAUGHS,
    EXTERNAL,
    SOME_LAUGHS,
    SRT,
    Fake,
    WordTokenizer,
    build_docx,
    notes_docx,
    rezip,
    runs,
    tracked_docx,
    with_doctype,
    zip_bomb,
)
from lxml import etree
from text_helpers import HOSTILE

from mtkit.text import TextOptions, translate_documents
from mtkit.text.files import FileError, ZipLimits, file_format, translate_file_bytes
from mtkit.text.files.subrip import wrap

OPTIONS = TextOptions("en")
KEPT = [
    "w:pPr",
    "w:bookmarkStart",
    "w:bookmarkEnd",
    "w:proofErr",
    "w:ins",
    "w:del",
    "w:sdt",
    "w:sdtPr",
    "w:sdtContent",
    "w:smartTag",
    "w:fldChar",
    "w:instrText",
]
TIMING = re.compile(
    r"^\ufeff?\d+\r?\n[0-9:,]+ --> [^\n]*\n", re.M
)  # a cue's number and timing lines


def translate(data: bytes, name: str, how: str = "upper", limit: int = 50, **kw) -> bytes:
    return translate_file_bytes(data, name, OPTIONS, WordTokenizer(), limit, Fake(how), **kw)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_text_files_keep_every_line_and_gap(name: str) -> None:
    text = HOSTILE[name]
    fake = Fake()
    out = translate_file_bytes(text.encode(), "a.txt", OPTIONS, WordTokenizer(), 5000, fake)
    assert out.decode("utf-8") == text.upper()
    assert len(fake.calls) <= 2  # every line of the file in one call (one more: cut again)


def test_a_text_file_is_its_lines_translated_in_one_call() -> None:
    fake = Fake()
    text = "A man runs. The dog sits.\r\n\r\n  Indented line\rold mac break\n"
    out = translate_file_bytes(text.encode(), "notes.TXT", OPTIONS, WordTokenizer(), 50, fake)
    assert out == text.upper().encode()
    assert fake.calls == [["A man runs.", "The dog sits.", "Indented line", "old mac break"]]


def test_an_html_file_is_one_document_with_its_tags() -> None:
    page = (
        "<!DOCTYPE html>\n<html><head><title>My page</title></head>\n<body>\n"
        '<p>Hello <b>big</b> <a href="/x">world</a>.</p>\n<ul><li>One</li></ul>\n'
        "</body></html>\n"
    )
    out = translate(page.encode(), "page.html").decode()
    assert '<p>HELLO <b>BIG</b> <a href="/x">WORLD.</a></p>' in out  # "world." is one word
    expected = translate_documents(
        [page], TextOptions("en", format="html"), WordTokenizer(), 50, Fake()
    )
    assert out == expected[0].text
    assert translate(page.encode(), "page.html", "reverse").decode().count("<b>") == 1


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_subtitles_keep_numbers_and_timings_byte_for_byte(eol: str) -> None:
    text = "\ufeff" + SRT.replace("\n", eol)
    fake = Fake()
    out = translate_file_bytes(text.encode(), "film.srt", OPTIONS, WordTokenizer(), 50, fake)
    result = out.decode("utf-8")
    assert TIMING.findall(result) == TIMING.findall(text) and len(TIMING.findall(text)) == 4
    kept = {"<I>": "<i>", "</I>": "</i>", "{\\AN8}": "{\\an8}"}  # tags at a cue's edges
    assert result == re.sub("|".join(map(re.escape, kept)), lambda m: kept[m[0]], text.upper())
    texts = [t for call in fake.calls for t in call]
    assert "I went to the store yesterday." in texts  # a cue's lines are one text
    assert "Hello there." in texts and "Hi, how are you?" in texts  # a dialogue's lines are not
    import srt

    assert [s.index for s in srt.parse(result)] == [1, 2, 3, 4]


def test_a_cue_is_wrapped_into_its_own_number_of_lines() -> None:
    out = translate(SRT.encode(), "a.srt", "reverse").decode()
    cue = out.split("\n\n")[1].split("\n")
    assert cue[2:] == ["<i>yesterday. store", "the to went I</i>"]
    assert out.split("\n\n")[2].split("\n")[2:] == ["- there. Hello", "- you? are how Hi,"]


@pytest.mark.parametrize(
    ("text", "lines", "expected"),
    [
        ("HELLO THERE FRIEND", 2, ["HELLO THERE", "FRIEND"]),
        ("a b c d", 2, ["a b", "c d"]),
        ("one", 3, ["one"]),
        ("", 2, []),
        ("aaaa b c d e", 2, ["aaaa b", "c d e"]),
        ("x " * 5000, 1, ["x " * 4999 + "x"]),
    ],
)
def test_wrap(text: str, lines: int, expected: list[str]) -> None:
    assert wrap(text, lines) == expected


def test_a_word_document_keeps_paragraphs_runs_tables_and_headers() -> None:
    data = build_docx()
    fake = Fake()
    out = translate_file_bytes(data, "report.docx", OPTIONS, WordTokenizer(), 50, fake)
    source, result = docx.Document(io.BytesIO(data)), docx.Document(io.BytesIO(out))
    assert len(result.paragraphs) == len(source.paragraphs) == 6
    for before, after in zip(source.paragraphs, result.paragraphs, strict=True):
        assert after.style.name == before.style.name
        assert after.text == before.text.upper()
        assert runs(after) == _merged_upper(runs(before))
    hello = runs(result.paragraphs[1])
    assert [r[0] for r in hello] == ["HELLO ", "BIG", " WORLD. A SECOND SENTENCE", " IN RED."]
    assert hello[1][1] is True and hello[3][4].pt == 14 and str(hello[3][5]) == "FF0000"
    table = result.tables[0]
    assert [c.text for c in table.rows[0].cells] == ["FIRST CELL", "SECOND CELL"]
    assert table.cell(1, 1).tables[0].cell(0, 0).text == "NESTED CELL"
    assert table.cell(0, 1).paragraphs[0].runs[0].underline is True
    header, footer = result.sections[0].header, result.sections[0].footer
    assert footer.paragraphs[0].text == "THE FOOTER"
    fields = header.paragraphs[0]._p.xpath(".//w:fldChar/@w:fldCharType | .//w:instrText/text()")
    assert fields == ["begin", " PAGE ", "separate", "end"]  # the field whole, in order
    assert header.paragraphs[0].text.startswith("PAGE ")
    for tag in ("w:drawing", "w:hyperlink", "w:br", "w:tab"):
        assert len(result.element.xpath(f"//{tag}")) == len(source.element.xpath(f"//{tag}"))
    assert "Column after a tab" in fake.calls[0] and "nested cell" in fake.calls[0]
    assert len(fake.calls) == 1


@pytest.mark.parametrize("how", ["upper", "reverse"])
def test_revisions_controls_bookmarks_and_fields_are_kept(how: str) -> None:
    data = tracked_docx()
    fake = Fake(how)
    out = translate_file_bytes(data, "a.docx", OPTIONS, WordTokenizer(), 50, fake)
    assert fake.calls == [["Plain inserted words control text Paris and", "entry two after"]]
    source, result = docx.Document(io.BytesIO(data)).element, docx.Document(io.BytesIO(out)).element
    for tag in KEPT:
        assert len(result.xpath(f"//{tag}")) == len(source.xpath(f"//{tag}")), tag
    for container, head in (("w:sdt", "w:sdtPr"), ("w:smartTag", "w:smartTagPr"), ("w:p", "w:pPr")):
        assert result.xpath(f"//{container}[*[1][self::{head}]]"), (container, head)
    assert result.xpath("//w:delText/text()") == ["deleted"]  # deletions are not translated
    assert "entry one" in result.xpath("//w:t/text()")  # a field's result, kept whole
    words = " ".join(result.xpath("//w:body/w:p[2]//w:t/text()")).split()
    assert sorted(words) == sorted(Fake(how).one("entry two after").text.split())


def test_footnotes_comments_and_text_boxes_are_translated() -> None:
    fake = Fake()
    out = translate_file_bytes(notes_docx(), "a.docx", OPTIONS, WordTokenizer(), 50, fake)
    package = zipfile.ZipFile(io.BytesIO(out))
    assert b"A NOTE HERE." in package.read("word/footnotes.xml")
    assert b"A COMMENT HERE" in package.read("word/comments.xml")
    body = docx.Document(io.BytesIO(out)).element
    assert body.xpath("//w:txbxContent//w:t/text()") == ["BOXED TEXT"]
    assert "".join(body.xpath("//w:body/w:p[1]/w:r/w:t/text()")) == "HELLO THERE AFTER THE BOX"
    assert len(body.xpath("//w:body/w:p[1]/w:r/w:pict")) == 1
    assert sorted(fake.calls[0]) == sorted(
        ["Hello there after the box", "boxed text", "A note here.", "A comment here"]
    )


def _merged_upper(found: list[tuple]) -> list[tuple]:
    """Runs upper-cased, neighbours with the same formatting merged (not breaks, pictures)."""
    out: list[tuple] = []
    for run in found:
        text = [t for t in (out[-1][0] if out else "", run[0]) if t and t != "\n"]
        if out and out[-1][1:] == run[1:] and len(text) == 2:
            out[-1] = (out[-1][0] + run[0].upper(), *run[1:])
        else:
            out.append((run[0].upper(), *run[1:]))
    return out


def test_formatting_follows_the_words_it_was_on() -> None:
    out = translate(build_docx(), "a.docx", "reverse")
    paragraph = docx.Document(io.BytesIO(out)).paragraphs[1]
    bold = [r[0] for r in runs(paragraph) if r[1]]
    red = [r[0] for r in runs(paragraph) if r[5] is not None]
    assert bold == ["big"] and red == ["red. in"]
    assert paragraph.text.split() == "world. big Hello red. in sentence second A".split()


def test_identity_keeps_the_document_text() -> None:
    data = build_docx()
    out = translate(data, "a.docx", "identity")
    source, result = docx.Document(io.BytesIO(data)), docx.Document(io.BytesIO(out))
    assert [p.text for p in result.paragraphs] == [p.text for p in source.paragraphs]


@pytest.mark.parametrize(
    ("name", "data", "why"),
    [
        ("a.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not UTF-8"),
        ("a.txt", b"text with a NUL\x00 byte", "binary"),
        ("a.srt", b"1\n00:00:01,000 --> 00:00:02,000\nHi\x01\x02\n", "binary"),
        ("a.srt", b"just some text\nthat is no subtitle\n", "not SubRip"),
        ("a.html", b"\xff\xfe<\x00p\x00>\x00", "not UTF-8"),
        ("a.docx", b"1\n00:00:01,000 --> 00:00:02,000\nHi\n", "not a zip"),
        ("a.docx", b"PK\x03\x04 truncated", "broken zip"),
        ("a.docx", rezip(build_docx(), {"word/document.xml": None}), "not a Word document"),
        ("a.exe", b"MZ", "not translated"),
        ("noname", b"text", "no suffix"),
    ],
)
def test_files_that_are_not_what_their_name_says_are_refused(
    name: str, data: bytes, why: str
) -> None:
    with pytest.raises(FileError, match=why):
        translate(data, name)


def test_file_formats_by_suffix() -> None:
    assert file_format("A.DOCX").kind == "docx" and file_format("../../etc/x.txt").kind == "text"
    assert file_format("c:\\dir\\page.htm").kind == "html" and file_format("x.srt").markup is False


def test_an_empty_text_file_and_an_empty_subtitle_file() -> None:
    assert translate(b"", "a.txt") == b"" and translate(b"", "a.srt") == b""


def test_a_zip_bomb_is_refused_before_python_docx_opens_it() -> None:
    with pytest.raises(FileError, match="times its size"):
        translate(zip_bomb(build_docx()), "a.docx")


def test_zip_limits_members_and_total_size() -> None:
    data = build_docx()
    with pytest.raises(FileError, match="members, more than the limit of 1000"):
        translate(rezip(data, {}, extra=1000), "a.docx")
    with pytest.raises(FileError, match="unzips to .* bytes, more than the limit"):
        translate(data, "a.docx", limits=ZipLimits(unzipped=10_000))
    with pytest.raises(FileError, match=r"no \[Content_Types\].xml"):
        translate(rezip(data, {"[Content_Types].xml": None}), "a.docx")
    with pytest.raises(FileError, match="compression method"):
        translate(rezip(data, {}, method=zipfile.ZIP_BZIP2), "a.docx")


def test_a_member_name_twice_is_refused() -> None:
    data = build_docx()
    out = io.BytesIO(data)
    with zipfile.ZipFile(out, "a") as archive, pytest.warns(UserWarning, match="Duplicate"):
        archive.writestr("word/document.xml", b"<x/>")
    with pytest.raises(FileError, match="member name twice"):
        translate(out.getvalue(), "a.docx")


@pytest.mark.parametrize(("doctype", "entity"), [(BILLION_LAUGHS, "lol9"), (EXTERNAL, "xxe")])
def test_xml_with_a_dtd_is_refused(doctype: str, entity: str) -> None:
    with pytest.raises(FileError, match="word/document.xml.*document type declaration"):
        translate(with_doctype(build_docx(), doctype, entity), "a.docx")


def _document(doctype: str, entity: str) -> bytes:
    namespace = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    return (
        f'<?xml version="1.0"?>{doctype}<w:document xmlns:w="{namespace}">'
        f"<w:t>&{entity};</w:t></w:document>"
    ).encode()


@pytest.mark.parametrize(("doctype", "entity"), [(SOME_LAUGHS, "lol3"), (EXTERNAL, "xxe")])
def test_python_docx_parses_without_expanding_entities(doctype: str, entity: str) -> None:
    """The second line of defence: python-docx's own parser expands nothing, reads nothing."""
    written = etree.tostring(parse_xml(_document(doctype, entity)))
    assert f"&{entity};".encode() in written and len(written) < 200
    assert b"lollol" not in written and b"root:" not in written


def test_python_docx_refuses_a_billion_laughs() -> None:
    with pytest.raises(etree.XMLSyntaxError, match="amplification"):
        parse_xml(_document(BILLION_LAUGHS, "lol9"))
