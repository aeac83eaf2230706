"""Text files the same way everywhere: UTF-8, one segment per line, written atomically.

Reading accepts what editors and other tools produce: a UTF-8 byte-order mark, CRLF line ends,
a missing final newline, gzip (``.gz``) and ``-`` for stdin. Lines are decoded by
:func:`mtkit.data.lines.decode_lines`, the rule every mtkit reader shares (lines end at ``\\n``
only; a file holding only a byte-order mark is empty); invalid UTF-8 is a user error that names
the file and line.

Writing goes to a temporary file in the target's directory, which is then renamed over the target,
so a crash or a full disk never leaves a half-written output behind.
"""

from __future__ import annotations

import contextlib
import gzip
import sys
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from mtkit.data.lines import decode_lines
from mtkit.errors import MtkitError
from mtkit.staging import staged_file

STDIN = "-"


def display_name(path: str | Path) -> str:
    """How messages name ``path``: ``<stdin>`` for ``-``, else the path as given."""
    return "<stdin>" if str(path) == STDIN else str(path)


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
    stripped; an empty file (or one holding only a byte-order mark) gives ``[]``, a file holding
    one newline gives ``[""]`` (:mod:`mtkit.data.lines`). Missing
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
