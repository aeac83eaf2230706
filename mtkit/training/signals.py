"""SIGINT and SIGTERM during training: stop at the next update boundary, with a checkpoint.

The loop polls :attr:`StopSignal.signum` (every rank agrees on it in the all-reduce of the
update); a second signal raises KeyboardInterrupt at once.
"""

from __future__ import annotations

import signal
import threading
from typing import Any


class StopSignal:
    """SIGINT/SIGTERM ask training to stop at the next update boundary; a second one aborts."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:  # asked twice: stop now
            raise KeyboardInterrupt
        self.signum = signum

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
