"""Helpers shared by the subcommands: turning user mistakes into one-line errors."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import click

from mtkit.errors import MtkitError


def one_line(message: str) -> str:
    """A message on one line: line breaks (from a library's error text) become spaces.

    >>> one_line("invalid YAML (bad character\\n  in <file>)")
    'invalid YAML (bad character in <file>)'
    """
    return re.sub(r"\s*\n\s*", " ", message.strip())


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn MtkitError (and a few OS errors a user causes) into click's one-line error, exit 1."""
    try:
        yield
    except MtkitError as err:
        raise click.ClickException(one_line(str(err))) from None
    except FileNotFoundError as err:
        raise click.ClickException(f"{err.filename}: no such file") from None
    except IsADirectoryError as err:
        raise click.ClickException(f"{err.filename}: is a directory") from None
    except PermissionError as err:
        raise click.ClickException(f"{err.filename}: permission denied") from None
    except OSError as err:
        where = f"{err.filename}: " if err.filename else ""
        raise click.ClickException(f"{where}{err.strerror or err}") from None
