"""Outputs written whole or not at all: build in a temporary sibling, then rename.

Every file mtkit writes (checkpoints, translations, scores, vocabularies, plots, a run's config
and metrics log) goes through :func:`staged_file`; ``mtkit prepare`` (a dataset) and ``mtkit
export`` (a model directory) write into :func:`staged_dir`. Readers never see a half-written
output: the temporary one is named ``.OUT.xxxx.tmp`` beside it, flushed to disk and renamed over
``OUT`` at the end; on any error (Ctrl-C included) it is removed, with any parent directories
made for it, so a failed command leaves the tree as it was. Missing parent directories of an
output are created, for every command alike.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

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
        _remove_dirs(made)
        raise


@contextlib.contextmanager
def staged_file(path: str | Path) -> Iterator[BinaryIO]:
    """Yield a binary file open on a temporary sibling of ``path``; when the block ends without
    an error, flush it to disk and rename it over ``path`` (readers see the old file or the new
    one, never a part), with the modes a plain open would have given it. On an error the
    temporary file goes, with any parent directories made for it, and an existing ``path`` stays
    as it was. Failures of the staging itself raise :class:`MtkitError` naming ``path``;
    exceptions raised inside the block pass through unchanged, for the caller to word."""
    path = Path(path)
    if path.is_dir():
        raise MtkitError(f"{path}: is a directory")
    made = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    base = made[-1].parent if made else path.parent  # the nearest existing ancestor
    if not base.is_dir():
        raise MtkitError(f"{path}: cannot write ({base} is not a directory)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        _remove_dirs(made)
        raise _cannot_write(path, err) from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            try:
                handle.flush()
                os.fsync(handle.fileno())
            except OSError as err:
                raise _cannot_write(path, err) from None
        try:
            tmp.chmod(0o666 & ~_umask())  # mkstemp makes 0600
            os.replace(tmp, path)
        except OSError as err:
            raise _cannot_write(path, err) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        _remove_dirs(made)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable; best effort (some file systems refuse)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _cannot_write(path: Path, err: OSError) -> MtkitError:
    if isinstance(err, IsADirectoryError):
        return MtkitError(f"{path}: is a directory")
    return MtkitError(f"{path}: cannot write ({err.strerror or err})")


def _remove_dirs(made: list[Path]) -> None:
    """Remove directories made for an output that failed (deepest first, empty ones only)."""
    for directory in made:
        with contextlib.suppress(OSError):
            directory.rmdir()


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _publish_modes(directory: Path) -> None:
    """Give the staged tree the modes a plain mkdir/open would have had (mkdtemp makes it 0700)."""
    umask = _umask()
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
