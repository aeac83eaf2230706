"""Whole files translated through the text layer, their structure kept: plain text, HTML,
SubRip subtitles and Word documents.

A file's name says what it should be (:data:`FORMATS`, by suffix) and its content must agree:
text formats must decode as UTF-8 and hold no control characters that text does not have
(:func:`~mtkit.text.files.plain.decode_text`), subtitles must parse as SubRip, and a ``.docx``
must be a zip package that passes :func:`~mtkit.text.files.package.check_package` (members,
sizes, compression ratios, no XML document type declarations) before python-docx opens it.
A file that does not is refused with a :class:`FileError` naming the problem. Every check is
made on the bytes alone: the files are untrusted (the server's uploads).

Each format module reads the file into texts, hands them all to
:func:`~mtkit.text.translate.translate_documents` in one call (so the units of a whole file are
batched together) and writes the translations back where the texts were:

- ``.txt`` (:mod:`~mtkit.text.files.plain`): every line a text, line breaks kept as they were;
- ``.html`` (:mod:`~mtkit.text.files.html`): one HTML document (:mod:`mtkit.text.markup`);
- ``.srt`` (:mod:`~mtkit.text.files.subrip`): every cue's text one text, numbers and timings kept
  byte for byte;
- ``.docx`` (:mod:`~mtkit.text.files.word`): every paragraph (body, tables, headers, footers,
  notes) one small HTML fragment whose inline elements stand for its runs, so that run
  formatting is carried by the word alignments as HTML's inline tags are
  (:mod:`~mtkit.text.files.wordml`).

Each format's module (:data:`MODULES`), and its library (``srt``, ``python-docx``), is imported
only when a file of its kind comes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from importlib import import_module
from pathlib import PurePosixPath

from mtkit.data.tokenizer import Tokenizer
from mtkit.errors import MtkitError
from mtkit.text.translate import TextOptions, Units

DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


class FileError(MtkitError):
    """A file refused: not what its name says, or beyond a limit."""


@dataclass(frozen=True)
class FileFormat:
    """What a file's suffix stands for: how it is read, what it is served as, and whether its
    markup rides on word alignments (the engine must give them)."""

    kind: str  # text | html | srt | docx
    media_type: str
    markup: bool = False


FORMATS = {
    ".txt": FileFormat("text", "text/plain; charset=utf-8"),
    ".html": FileFormat("html", "text/html; charset=utf-8", markup=True),
    ".htm": FileFormat("html", "text/html; charset=utf-8", markup=True),
    ".srt": FileFormat("srt", "application/x-subrip; charset=utf-8"),
    ".docx": FileFormat("docx", DOCX_TYPE, markup=True),
}
# each kind's module, imported when a file of that kind comes: translate(data, options, ...)
MODULES = {"text": "plain", "html": "html", "srt": "subrip", "docx": "word"}


@dataclass(frozen=True)
class ZipLimits:
    """What a zip package (a ``.docx``) may hold: members, their total unzipped size, and how
    much more a member larger than ``ratio_floor`` bytes may unzip to than it takes."""

    members: int = 1000
    unzipped: int = 64 * 2**20
    ratio: int = 100
    ratio_floor: int = 2**20


def file_format(name: str) -> FileFormat:
    """The format a file name's suffix says (case ignored); refused when there is none."""
    suffix = PurePosixPath(name.replace("\\", "/")).suffix.lower()
    if suffix not in FORMATS:
        what = f"{suffix!r} files" if suffix else "a name with no suffix"
        raise FileError(f"{what}: not translated (expected {', '.join(FORMATS)})")
    return FORMATS[suffix]


def translate_file_bytes(
    data: bytes,
    name: str,
    options: TextOptions,
    tokenizer: Tokenizer,
    limit: int,
    units: Units,
    limits: ZipLimits | None = None,
) -> bytes:
    """File ``data`` (its format from ``name``) translated, its structure kept: the same bytes
    where nothing is translated. ``options`` give the language, sentence splitting and spans
    (the format is the file's); ``limit`` and ``units`` are :func:`translate_documents`'s.
    Raises :class:`FileError` for a file that is not what its name says or breaks a limit."""
    form = file_format(name)
    module = import_module(f"mtkit.text.files.{MODULES[form.kind]}")
    options = replace(options, format="html" if form.kind == "html" else "text")
    return module.translate(data, options, tokenizer, limit, units, limits or ZipLimits())


__all__ = [
    "FORMATS",
    "FileError",
    "FileFormat",
    "ZipLimits",
    "file_format",
    "translate_file_bytes",
]
