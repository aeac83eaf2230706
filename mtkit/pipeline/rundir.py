"""The run directory of `mtkit train`: who writes it, its lock, and what a failed start leaves."""

from __future__ import annotations

import contextlib
import os
import shutil
import typing
from pathlib import Path

from mtkit.errors import MtkitError


def is_main() -> bool:
    """Rank 0 of a torchrun job, or a process outside torchrun: the one that writes the run
    directory and prints."""
    return int(os.environ.get("RANK", "0")) == 0


@contextlib.contextmanager
def run_dir_lock(run_dir: Path) -> typing.Iterator[None]:
    """An exclusive lock on the run directory (``flock`` on the directory itself: no file is
    added, and the kernel drops it when the process dies, ``kill -9`` included) while this
    process trains into it; a second `mtkit train` on the same directory is refused."""
    try:
        import fcntl
    except ImportError:  # no flock on this platform: no lock
        yield
        return
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            busy = "another mtkit train is writing this run directory (--run-dir)"
            raise MtkitError(f"{run_dir}: {busy}; wait for it to stop or use another") from None
        yield
    finally:
        os.close(fd)


def remove_unstarted(run_dir: Path, made: list[Path]) -> None:
    """A run that failed before its first checkpoint leaves no directory this call created."""
    if not made or not is_main() or any(run_dir.glob("checkpoint*.pt")):
        return
    shutil.rmtree(run_dir, ignore_errors=True)
    for parent in made[1:]:
        with contextlib.suppress(OSError):
            parent.rmdir()
