"""Text files the same way everywhere: UTF-8, one segment per line, written atomically.

Reading accepts what editors and other tools produce: a UTF-8 byte-order mark, CRLF line ends,
a missing final newline, gzip (``.gz``) and ``-`` for stdin. Lines are split on ``\\n`` only, so
characters that :meth:`str.splitlines` would also split on (U+2028, U+0085, a lone ``\\r``, form
feed, ...) stay inside their segment and parallel files stay parallel. Invalid UTF-8 is a user
error that names the file and line.

Writing goes to a temporary file in the target's directory, which is then renamed over the target,
so a crash or a full disk never leaves a half-written output behind.
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import sys
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from mtkit.errors import MtkitError
from mtkit.staging import staged_file

STDIN = "-"


def display_name(path: str | Path) -> str:
    """How messages name ``path``: ``<stdin>`` for ``-``, else the path as given."""
    return "<stdin>" if str(path) == STDIN else str(path)


def decode_line(raw: bytes, name: str, number: int) -> str:
    """Decode one raw line (with or without its line end) of file ``name``.

    Strips the trailing ``\\n`` or ``\\r\\n`` and, on line 1, a UTF-8 byte-order mark.

    >>> decode_line(b"\\xef\\xbb\\xbfHallo Welt\\r\\n", "f.txt", 1)
    'Hallo Welt'
    """
    if number == 1 and raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8) :]
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise MtkitError(
            f"{name}:{number}: invalid UTF-8 (byte 0x{raw[err.start]:02x} at byte {err.start + 1} "
            "of the line)"
        ) from None


@contextlib.contextmanager
def _open_binary(path: str | Path) -> Iterator[BinaryIO]:
    """Open ``path`` for binary reading: stdin for ``-``, gzip for ``*.gz``, else a plain file."""
    if str(path) == STDIN:
        stdin = sys.stdin
        yield stdin.buffer if hasattr(stdin, "buffer") else stdin  # type: ignore[misc]
        return
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        handle = opener(path, "rb")
    except FileNotFoundError:
        raise MtkitError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise MtkitError(f"{path}: is a directory, not a text file") from None
    except OSError as err:
        raise MtkitError(f"{path}: cannot read ({err.strerror or err})") from None
    with handle:
        yield handle  # type: ignore[misc]


def decode_lines(raw_lines: Iterable[bytes], name: str) -> Iterator[str]:
    """Decode raw lines as a binary file yields them (each ending in ``\\n``, the last maybe not).

    >>> list(decode_lines([b"\\xef\\xbb\\xbfeins\\r\\n", b"zwei"], "f.txt"))
    ['eins', 'zwei']
    """
    for number, raw in enumerate(raw_lines, 1):
        if number == 1 and raw == codecs.BOM_UTF8:
            return  # a file holding nothing but a byte-order mark is empty
        yield decode_line(raw, name, number)


def iter_lines(path: str | Path) -> Iterator[str]:
    """Yield the lines of a UTF-8 text file (``-``: stdin; ``*.gz``: gzip) without line ends.

    Streams: memory stays constant however large the file.
    """
    name = display_name(path)
    with _open_binary(path) as handle:
        try:
            yield from decode_lines(handle, name)
        except (gzip.BadGzipFile, EOFError, zlib.error) as err:
            raise MtkitError(f"{name}: corrupt or truncated gzip data ({err})") from None
        except IsADirectoryError:
            raise MtkitError(f"{name}: is a directory, not a text file") from None
        except OSError as err:
            raise MtkitError(f"{name}: read error ({err.strerror or err})") from None


def read_lines(path: str | Path) -> list[str]:
    """Read a whole UTF-8 text file as a list of lines without line ends.

    ``-`` reads stdin and ``*.gz`` is decompressed. A byte-order mark and CRLF line ends are
    stripped; an empty file gives ``[]``, a file holding one newline gives ``[""]``. Missing
    files, directories and invalid UTF-8 raise :class:`MtkitError` naming the file (and line).
    """
    return list(iter_lines(path))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (:func:`mtkit.staging.staged_file`);
    :class:`MtkitError` naming ``path`` when it cannot."""
    try:
        with staged_file(path) as handle:
            handle.write(data)
    except OSError as err:
        raise MtkitError(f"{path}: cannot write ({err.strerror or err})") from None


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` as UTF-8 with :func:`atomic_write_bytes`, line ends as given."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_lines(path: str | Path, lines: Iterable[str]) -> None:
    """Write ``lines`` one per line (each ending in ``\\n``) with :func:`atomic_write_text`."""
    atomic_write_text(path, "".join(f"{line}\n" for line in lines))
