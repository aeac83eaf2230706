"""HTML files: one document, translated as ``"format": "html"`` texts are
(:mod:`mtkit.text.markup`: lxml's HTML parser, no network, the blocks cut into sentences and the
inline tags carried by the word alignments). The file must be UTF-8 text
(:func:`~mtkit.text.files.plain.decode_text`) and is written back as UTF-8.
"""

from __future__ import annotations

from mtkit.data.tokenizer import Tokenizer
from mtkit.text.files import ZipLimits
from mtkit.text.files.plain import decode_text
from mtkit.text.translate import TextOptions, Units, translate_documents


def translate(
    data: bytes,
    options: TextOptions,
    tokenizer: Tokenizer,
    limit: int,
    units: Units,
    limits: ZipLimits,
) -> bytes:
    """An HTML file translated, its markup kept (``options.format`` is "html")."""
    document = decode_text(data)
    found = translate_documents([document], options, tokenizer, limit, units)
    return found[0].text.encode("utf-8")
