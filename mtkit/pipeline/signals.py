"""SIGINT and SIGTERM for streaming commands: stop at once, but never in the middle of a write.

`mtkit translate` writes its output a chunk at a time. Inside :class:`SignalGuard` the first
SIGINT or SIGTERM raises :class:`Interrupted` where the program is (reading input, translating),
except inside :meth:`SignalGuard.writing`: a write in progress is completed first and the
exception comes right after it. So the output holds whole chunks only, and everything written
has been flushed. A second signal raises at once, even in a write (a reader that stopped
reading must not keep the command alive).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


class Interrupted(Exception):
    """A signal stopped the command; ``lines`` counts the input lines whose output was written."""

    def __init__(self, signum: int, lines: int = 0) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum, self.lines = signum, lines


class SignalGuard:
    """Turns SIGINT/SIGTERM into :class:`Interrupted` (installed in the main thread only)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._writing = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def _handle(self, signum: int, frame: Any) -> None:
        again = self.signum is not None
        self.signum = self.signum or signum
        if again or not self._writing:
            raise Interrupted(self.signum)

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """A write that a (first) signal does not cut: it raises once the block is done."""
        self._writing = True
        try:
            yield
        finally:
            self._writing = False
        if self.signum is not None:
            raise Interrupted(self.signum)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Inside the block SIGINT and SIGTERM raise :class:`Interrupted` wherever the program is,
    so that cleanup code (``finally``, ``except BaseException``) runs for both; for commands
    whose output appears only at the end (``mtkit prepare``). The old handlers come back after."""

    def _raise(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, _raise) for sig in SignalGuard.SIGNALS}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
