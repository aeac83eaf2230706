"""Word documents (``.docx``): every paragraph translated, its runs' formatting kept.

The package is checked first (:func:`~mtkit.text.files.package.check_package`: a zip of
bounded size with no XML document type declaration), then opened with python-docx. The
paragraphs are every ``w:p`` of the parts that hold text: the body (its tables and their cells,
nested tables, text boxes, content controls), every header and footer, footnotes, endnotes and
comments. Each paragraph with words in it is an HTML fragment (:mod:`mtkit.text.files.wordml`);
all of them go to the text layer in one call and come back into the same paragraphs, so the
document keeps its paragraphs, tables, cells, sections, styles, images and fields, and each
run its formatting. Paragraphs with no words are not touched.

python-docx reads footnotes and endnotes as opaque parts; they are registered here as XML parts
(python-docx's own extension point, :class:`~docx.opc.part.PartFactory`) so that their
paragraphs are translated too.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from mtkit.data.tokenizer import Tokenizer
from mtkit.text.files import FileError, ZipLimits
from mtkit.text.files.package import check_package
from mtkit.text.files.wordml import Paragraph, w
from mtkit.text.translate import TextOptions, Units, translate_documents

# the parts whose paragraphs are translated (python-docx's content-type names)
TRANSLATED = (
    "WML_DOCUMENT_MAIN",
    "WML_HEADER",
    "WML_FOOTER",
    "WML_FOOTNOTES",
    "WML_ENDNOTES",
    "WML_COMMENTS",
)


def translate(
    data: bytes,
    options: TextOptions,
    tokenizer: Tokenizer,
    limit: int,
    units: Units,
    limits: ZipLimits,
) -> bytes:
    """A ``.docx`` with every paragraph translated, runs and structure kept."""
    check_package(data, limits)
    document = open_document(data)
    paragraphs = [
        Paragraph.read(p) for part in text_parts(document) for p in list(part.element.iter(w("p")))
    ]
    todo = [p for p in paragraphs if p.words]
    markup = replace(options, split=True, format="html")
    found = translate_documents([p.html for p in todo], markup, tokenizer, limit, units)
    for paragraph, translation in zip(todo, found, strict=True):
        paragraph.rebuild(translation.text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def open_document(data: bytes) -> Any:
    """A checked package opened with python-docx (its errors: :class:`FileError`)."""
    import docx
    from docx.opc.constants import CONTENT_TYPE
    from docx.opc.part import PartFactory, XmlPart

    for name in ("WML_FOOTNOTES", "WML_ENDNOTES"):
        PartFactory.part_type_for.setdefault(getattr(CONTENT_TYPE, name), XmlPart)
    try:
        return docx.Document(io.BytesIO(data))
    except Exception as err:  # python-docx fails in many ways on what is not a Word document
        detail = " ".join(str(err).split())[:200]
        raise FileError(f"not a Word document: {type(err).__name__}: {detail}") from None


def text_parts(document: Any) -> Iterator[Any]:
    """The XML parts of ``document`` that hold text, each once."""
    from docx.opc.constants import CONTENT_TYPE
    from docx.opc.part import XmlPart

    wanted = {getattr(CONTENT_TYPE, name) for name in TRANSLATED}
    for part in document.part.package.iter_parts():
        if isinstance(part, XmlPart) and part.content_type in wanted:
            yield part
