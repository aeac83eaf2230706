"""The one exception type for user mistakes: the CLI prints it on one line, no traceback."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

# errors only a write gets: the disk (or the user's quota, or the file size limit) is full
FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class MtkitError(Exception):
    """A problem with the user's input, files or options (not a bug in mtkit)."""


@contextlib.contextmanager
def naming_output(name: str) -> Iterator[None]:
    """A full disk while writing ``name`` becomes an MtkitError that names it (a write's own
    OSError names no file)."""
    try:
        yield
    except OSError as err:
        if err.errno not in FULL or err.filename:
            raise
        raise MtkitError(f"{name}: cannot write ({err.strerror or err})") from None
