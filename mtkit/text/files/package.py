"""Checks on a zip package (a ``.docx``) before any library opens it: the upload is untrusted.

A Word document is a zip of XML parts. Before python-docx reads one, :func:`check_package`
makes sure that it is a zip at all (its first bytes, then its central directory), and that
unzipping it costs what a document costs (:class:`~mtkit.text.files.ZipLimits`):

- at most ``members`` members, no name twice (two readers could take different ones);
- at most ``unzipped`` bytes in all, as the central directory declares them; Python's zipfile,
  which python-docx reads with, never inflates a member past its declared size (it stops there
  and fails on the checksum), so the declared sizes bound the work;
- no member larger than ``ratio_floor`` that unzips to more than ``ratio`` times its compressed
  size (a zip bomb: zeros compress a thousandfold, text and XML about tenfold);
- no encryption, no compression but stored and deflated (what Word writes);
- ``[Content_Types].xml`` present (every Office package has it);
- no member that is XML with a document type declaration. OOXML never has one, and a DTD is
  where entities are declared: refusing it refuses the billion laughs (entities that expand to
  gigabytes) and external entities (a file or URL read into the document). Each member is
  searched for ``<!DOCTYPE`` in UTF-8, UTF-16 and UTF-32, then parsed with lxml (entity
  expansion, DTD loading and network access off) to find one in any other encoding it may
  declare; a member that does not parse is not XML (an image) and is left alone.

python-docx's own parser (``docx.oxml.parser.oxml_parser``) does not expand entities either
(``resolve_entities=False``; lxml reads no DTD and uses no network by default, and libxml2
refuses a billion laughs outright): the tests check both.
"""

from __future__ import annotations

import io
import zipfile

from lxml import etree

from mtkit.text.files import FileError, ZipLimits

ZIP_MAGIC = b"PK\x03\x04"
METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
CONTENT_TYPES = "[Content_Types].xml"
CODECS = ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")
DOCTYPES = tuple("<!DOCTYPE".encode(codec) for codec in CODECS)


def check_package(data: bytes, limits: ZipLimits) -> None:
    """Refuse (:class:`FileError`) a ``.docx`` that is not a zip, or whose unzipping would cost
    more than ``limits``, or that holds XML with a document type declaration."""
    if not data.startswith(ZIP_MAGIC):
        raise FileError("not a Word document: not a zip archive (a .docx is one)")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as err:
        raise FileError(f"not a Word document: a broken zip archive ({err})") from None
    with archive:
        infos = archive.infolist()
        _check_sizes(infos, limits)
        if CONTENT_TYPES not in {info.filename for info in infos}:
            raise FileError(f"not a Word document: no {CONTENT_TYPES} in the zip archive")
        for info in infos:
            try:
                member = archive.read(info)
            except (zipfile.BadZipFile, ValueError, EOFError, OSError) as err:
                raise FileError(f"a broken zip member {info.filename!r} ({err})") from None
            check_xml(info.filename, member)


def _check_sizes(infos: list[zipfile.ZipInfo], limits: ZipLimits) -> None:
    if len(infos) > limits.members:
        raise FileError(
            f"a zip archive of {len(infos)} members, more than the limit of {limits.members}"
        )
    if len({info.filename for info in infos}) != len(infos):
        raise FileError("a zip archive with a member name twice")
    total = sum(info.file_size for info in infos)
    if total > limits.unzipped:
        raise FileError(f"unzips to {total} bytes, more than the limit of {limits.unzipped}")
    for info in infos:
        if info.flag_bits & 0x1:
            raise FileError(f"an encrypted zip member {info.filename!r}")
        if info.compress_type not in METHODS:
            raise FileError(
                f"zip member {info.filename!r}: compression method "
                f"{info.compress_type}, not stored or deflated"
            )
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > limits.ratio_floor and ratio > limits.ratio:
            raise FileError(
                f"zip member {info.filename!r} unzips to {ratio:.0f} times "
                f"its size, more than the limit of {limits.ratio}"
            )


def check_xml(name: str, data: bytes) -> None:
    """Refuse a member that is XML with a document type declaration (entities live there)."""
    refused = FileError(
        f"zip member {name!r}: an XML document type declaration (entities and "
        "DTDs are not accepted in a Word document)"
    )
    if any(mark in data for mark in DOCTYPES):
        raise refused
    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False
    )
    try:
        root = etree.fromstring(data, parser)
    except (etree.XMLSyntaxError, ValueError):
        return  # not XML: python-docx, which parses it as XML only if it must, fails then
    info = root.getroottree().docinfo
    if info.doctype or info.internalDTD is not None:
        raise refused
