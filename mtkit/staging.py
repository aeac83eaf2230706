"""Directory outputs written whole or not at all: build in a temporary sibling, then rename.

``mtkit prepare`` (a dataset) and ``mtkit export`` (a model directory) write into
:func:`staged_dir`. Readers never see a half-written directory: the temporary one is named
``.OUT.xxxx.tmp``, and is removed on any error (Ctrl-C included); one that a killed run left is
removed by the next run for the same output.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mtkit.errors import MtkitError


def check_out_dir(out: Path, force: bool) -> None:
    """Refuse a file, or a non-empty directory unless ``force`` (checked before any work)."""
    if out.exists() and not out.is_dir():
        raise MtkitError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise MtkitError(f"{out}: already exists (use --force to replace it)")


@contextlib.contextmanager
def staged_dir(out: str | Path, force: bool = False) -> Iterator[Path]:
    """Yield an empty temporary directory beside ``out``; when the block ends without an error,
    rename it into place (replacing an existing ``out`` only then). On an error the temporary
    directory goes, with any parent directories made for it."""
    out = Path(out)
    check_out_dir(out, force)
    made = [p for p in (out.parent, *out.parent.parents) if not p.exists()]
    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in [*out.parent.glob(f".{out.name}.*.tmp"), *out.parent.glob(f".{out.name}.*.old")]:
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        yield tmp
        _publish_modes(tmp)
        _publish(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for parent in made:
            with contextlib.suppress(OSError):
                parent.rmdir()
        raise


def _publish_modes(directory: Path) -> None:
    """Give the staged tree the modes a plain mkdir/open would have had (mkdtemp makes it 0700)."""
    umask = os.umask(0)
    os.umask(umask)
    directory.chmod(0o777 & ~umask)
    for path in directory.rglob("*"):
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)


def _publish(tmp: Path, out: Path) -> None:
    """Rename the finished directory into place; an existing ``out`` is restored on failure."""
    if not out.exists():
        os.rename(tmp, out)
        return
    trash = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
    os.rename(out, trash / "old")
    try:
        os.rename(tmp, out)
    except OSError:
        os.rename(trash / "old", out)
        raise
    shutil.rmtree(trash, ignore_errors=True)
