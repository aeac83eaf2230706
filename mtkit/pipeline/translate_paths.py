"""What `mtkit translate` checks and reports before and after translating, without a model:
its paths (:func:`check_paths`) and its summary (:class:`TranslateStats`). Light to import:
the warm client (:mod:`mtkit.pipeline.warm`) uses them without loading torch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mtkit.errors import MtkitError

STDIO = "-"


@dataclass
class TranslateStats:
    lines: int
    seconds: float

    def __str__(self) -> str:
        rate = self.lines / self.seconds if self.seconds > 0 else 0.0
        return f"translated {self.lines} lines in {self.seconds:.1f}s ({rate:.1f} lines/s)"


def check_paths(input: str, output: str) -> None:
    """Fail before loading any model: input missing, output directory missing."""
    if input != STDIO and not Path(input).exists():  # exists(): pipes like <(zcat f.gz) too
        raise MtkitError(f"{input}: no such input file")
    if input != STDIO and Path(input).is_dir():
        raise MtkitError(f"{input}: is a directory, not a text file")
    if output != STDIO and Path(output).is_dir():
        raise MtkitError(f"{output}: is a directory")
