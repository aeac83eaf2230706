"""Plain text files: UTF-8 checked, every line a text, the line breaks kept as they were.

:func:`decode_text` is the content check of every text format (``.txt``, ``.html``, ``.srt``):
the bytes must be UTF-8 (a byte-order mark is kept, as a character) and hold no C0 control
character but tab, line feed, vertical tab, form feed and carriage return; a NUL or an escape
is a binary file, whatever its name says.

:func:`translate` cuts the text at its line breaks (``\\r\\n``, ``\\n`` or a lone ``\\r``, each
kept as it was), hands every line to the text layer as a text (so a warning names its line,
and a line break always ends a sentence, as ``mtkit translate --split-sentences`` reads
lines) and joins the translations with the same breaks: the file keeps its lines, its blank
lines, its indentation and whether it ends with a line break.
"""

from __future__ import annotations

import re

from mtkit.data.tokenizer import Tokenizer
from mtkit.text.files import FileError, ZipLimits
from mtkit.text.translate import TextOptions, Units, translate_documents

BREAKS = re.compile(r"(\r\n|\n|\r)")
BINARY = re.compile(r"[\x00-\x08\x0e-\x1f]")  # C0 controls that text does not have


def decode_text(data: bytes) -> str:
    """``data`` as text: UTF-8 with no binary control characters, else :class:`FileError`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FileError(
            f"not UTF-8 text (byte 0x{data[err.start]:02x} at byte {err.start})"
        ) from None
    found = BINARY.search(text)
    if found:
        raise FileError(
            f"binary, not text (control character U+{ord(found.group()):04X} at "
            f"character {found.start()})"
        )
    return text


def translate(
    data: bytes,
    options: TextOptions,
    tokenizer: Tokenizer,
    limit: int,
    units: Units,
    limits: ZipLimits,
) -> bytes:
    """A plain text file translated line by line, its line breaks kept."""
    return translate_plain(decode_text(data), options, tokenizer, limit, units).encode("utf-8")


def translate_plain(
    text: str, options: TextOptions, tokenizer: Tokenizer, limit: int, units: Units
) -> str:
    """``text`` translated line by line (line ``n`` is text ``n`` in warnings)."""
    parts = BREAKS.split(text)  # line, break, line, ..., line
    lines, breaks = parts[0::2], parts[1::2]
    found = translate_documents(lines, options, tokenizer, limit, units)
    return "".join(t.text + b for t, b in zip(found, [*breaks, ""], strict=True))
