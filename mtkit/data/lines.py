"""Raw bytes to lines of text: the one rule every mtkit reader follows.

Every reader (``mtkit.pipeline.textio`` for evaluate and plot, :mod:`mtkit.data.corpus` for spm
and prepare, ``mtkit.pipeline.translate``) iterates a binary stream, which yields lines ending in
``\\n`` (the last one maybe not), and decodes them with :func:`decode_lines`:

- lines end at ``\\n`` only, and one ``\\r`` before it (CRLF) is dropped; a lone ``\\r`` inside a
  line, U+2028, U+0085, form feed, ... stay in the line (``wc -l`` counts the same lines), so
  parallel files stay parallel;
- a UTF-8 byte-order mark at the start of the file is dropped; elsewhere U+FEFF is text;
- the bytes after the last ``\\n``, when there are any, are a last line (a lone ``\\r`` there
  gives ``""``);
- so a file holding only a byte-order mark is an empty file: ``b""`` and ``BOM`` give ``[]``,
  ``b"\\n"`` and ``BOM + b"\\n"`` give ``[""]``;
- invalid UTF-8 is the one difference between readers, and an explicit parameter: strict
  (``on_invalid=None``) raises :class:`MtkitError` naming file and line; lenient (a function, as
  ``mtkit translate`` passes so that a 10-million-line job does not die at line 9 million)
  replaces the bad bytes by U+FFFD and hands the same one-line message to ``on_invalid``.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable, Iterator, Sequence

from mtkit.errors import MtkitError

BOM = codecs.BOM_UTF8
OnInvalid = Callable[[str], None]  # receives "NAME:LINE: invalid UTF-8 (byte 0xNN at byte K ...)"


def decode_line(raw: bytes, name: str, number: int, on_invalid: OnInvalid | None = None) -> str:
    """Decode line ``number`` (1-based) of file ``name``, with or without its line end.

    Drops a trailing ``\\n`` or ``\\r\\n`` and, on line 1, a byte-order mark. Invalid UTF-8:
    ``on_invalid=None`` raises :class:`MtkitError`; otherwise the bad bytes become U+FFFD and
    ``on_invalid`` gets the message that would have been raised.

    >>> decode_line(b"\\xef\\xbb\\xbfHallo Welt\\r\\n", "f.txt", 1)
    'Hallo Welt'
    >>> decode_line(b"caf\\xe9\\n", "f.txt", 7, on_invalid=print)
    f.txt:7: invalid UTF-8 (byte 0xe9 at byte 4 of the line)
    'caf\ufffd'
    """
    if number == 1 and raw.startswith(BOM):
        raw = raw[len(BOM) :]
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        message = (
            f"{name}:{number}: invalid UTF-8 (byte 0x{raw[err.start]:02x} at byte {err.start + 1} "
            "of the line)"
        )
    if on_invalid is None:
        raise MtkitError(message)
    on_invalid(message)
    return raw.decode("utf-8", "replace")


def decode_lines(
    raw_lines: Iterable[bytes], name: str, on_invalid: OnInvalid | None = None
) -> Iterator[str]:
    """Decode raw lines as a binary file yields them (each ending in ``\\n``, the last maybe not)
    with :func:`decode_line`; a file holding only a byte-order mark yields nothing.

    >>> list(decode_lines([b"\\xef\\xbb\\xbfeins\\r\\n", b"zwei"], "f.txt"))
    ['eins', 'zwei']
    >>> list(decode_lines([b"\\xef\\xbb\\xbf"], "f.txt")), list(decode_lines([b"\\n"], "f.txt"))
    ([], [''])
    """
    for number, raw in enumerate(raw_lines, start=1):
        if number == 1 and raw == BOM:
            return
        yield decode_line(raw, name, number, on_invalid)


Numbers = int | Sequence[int]  # in warnings: the first line's number, or each line's


def line_numbers(numbers: Numbers, count: int) -> list[int]:
    """Each of ``count`` lines' number: from ``numbers`` on, or ``numbers`` itself."""
    if isinstance(numbers, int):
        return list(range(numbers, numbers + count))
    if len(numbers) != count:
        raise ValueError(f"{len(numbers)} line numbers for {count} lines")
    return list(numbers)
