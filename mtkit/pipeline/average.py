"""`mtkit average`: the last N numbered checkpoints of a run, or the given files, averaged."""

from __future__ import annotations

import typing
from pathlib import Path

from mtkit.errors import MtkitError


def run_average(
    run_dir: str | None, last: int | None, checkpoints: typing.Sequence[str], output: str
) -> str:
    """`mtkit average`: the last N checkpoints of a run, or the given files, into ``output``."""
    from mtkit.training.average import average_checkpoints
    from mtkit.training.state import numbered_checkpoints

    if bool(checkpoints) == (run_dir is not None or last is not None):
        raise MtkitError("give either --last N RUN_DIR or one or more -c CHECKPOINT")
    if checkpoints:
        paths = [Path(p) for p in checkpoints]
    else:
        if run_dir is None or last is None or last < 1:
            raise MtkitError("--last N RUN_DIR: give N >= 1 and the run directory")
        if not Path(run_dir).is_dir():
            raise MtkitError(f"{run_dir}: no such run directory")
        paths = numbered_checkpoints(run_dir)[-last:]
        if len(paths) < last:
            raise MtkitError(f"{run_dir}: {len(paths)} numbered checkpoints, fewer than {last}")
    average_checkpoints(paths, output)
    return f"averaged {len(paths)} checkpoints ({', '.join(p.name for p in paths)}) into {output}"
