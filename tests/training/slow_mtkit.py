"""`python slow_mtkit.py ARGS` is `python -m mtkit ARGS` with delays that give a test time to
kill the process at a chosen moment, or a kill at a chosen update. Delays change no number: the
run computes exactly what `python -m mtkit` computes.

MTKIT_TEST_UPDATE_DELAY=S    sleep S seconds after every update
MTKIT_TEST_WRITE_PAUSE=S     in the first checkpoint write, once more than PAUSE_AFTER bytes
                             are written, flush them to the temporary file and sleep S seconds
MTKIT_TEST_KILL_AT_UPDATE=N  SIGKILL the process once update N and what follows it (validation,
                             checkpoints) are done
"""

from __future__ import annotations

import os
import runpy
import signal
import time
from typing import Any

import torch

from mtkit.training import loop

PAUSE_AFTER = 16384


class PausingFile:
    """A binary file that pauses once, mid-write, with what it has so far on disk."""

    def __init__(self, handle: Any, pause: float) -> None:
        self.handle, self.pause, self.written = handle, pause, 0

    def write(self, data: Any) -> int:
        count = self.handle.write(data)
        self.written += len(data)
        if self.pause and self.written > PAUSE_AFTER:
            self.handle.flush()
            time.sleep(self.pause)
            self.pause = 0.0
        return count

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)


def slow_updates(delay: float) -> None:
    real = loop.Trainer._update

    def update(self: loop.Trainer, *args: Any) -> str | None:
        reason = real(self, *args)
        time.sleep(delay)
        return reason

    loop.Trainer._update = update  # type: ignore[method-assign]


def kill_at_update(update: int) -> None:
    real = loop.Trainer._update

    def update_then_kill(self: loop.Trainer, *args: Any) -> str | None:
        reason = real(self, *args)
        if self.state.update == update:
            os.kill(os.getpid(), signal.SIGKILL)
        return reason

    loop.Trainer._update = update_then_kill  # type: ignore[method-assign]


def pause_first_write(pause: float) -> None:
    real = torch.save
    pending = [pause]

    def save(obj: object, f: Any, *args: Any, **kwargs: Any) -> None:
        real(obj, PausingFile(f, pending.pop()) if pending else f, *args, **kwargs)

    torch.save = save


if __name__ == "__main__":
    if os.environ.get("MTKIT_TEST_UPDATE_DELAY"):
        slow_updates(float(os.environ["MTKIT_TEST_UPDATE_DELAY"]))
    if os.environ.get("MTKIT_TEST_WRITE_PAUSE"):
        pause_first_write(float(os.environ["MTKIT_TEST_WRITE_PAUSE"]))
    if os.environ.get("MTKIT_TEST_KILL_AT_UPDATE"):
        kill_at_update(int(os.environ["MTKIT_TEST_KILL_AT_UPDATE"]))
    runpy.run_module("mtkit", run_name="__main__", alter_sys=True)
