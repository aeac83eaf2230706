"""`mtkit distill`: a teacher's translations of a corpus, for sequence-level knowledge
distillation (Kim & Rush 2016), written so that an interruption loses at most one part.

The source is read in parts of ``config.part_lines`` lines. Part ``k`` is translated (beam
search by default, by one checkpoint or an ensemble) into ``PARTS/part.K.out`` through a
temporary file renamed when the part is whole (:func:`mtkit.staging.staged_file`), so a part
file that exists is a finished part. Run again after an interruption (a signal, a crash, a
machine taken away), the same command skips the finished parts and translates the rest; the
translation of a part depends only on its lines, so the output equals an uninterrupted run's.
When every part is there they are joined into the output (staged too: it appears whole) and, unless
``keep_parts``, the parts directory goes.

``PARTS/job.json`` records what the parts were made from: the source's and each checkpoint's size
and BLAKE2 digest, the search and the settings that change a translation
(:meth:`DistillConfig.job`). Parts made from anything else are refused, in one line naming what
differs, rather than mixed into another job's output. Lines in = lines out: a part whose line
count is wrong is translated again, and the output is checked before it is written.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO

from mtkit.config import DistillConfig
from mtkit.engines import load_engine
from mtkit.engines.base import Engine
from mtkit.errors import MtkitError, naming_output
from mtkit.pipeline.signals import Interrupted, SignalGuard
from mtkit.pipeline.translate import read_lines, translate_chunk
from mtkit.staging import staged_file

JOB = "job.json"
Report = Callable[[str], None]


@dataclass
class DistillStats:
    lines: int  # source lines = output lines
    parts: int  # parts in all
    translated: int  # parts translated by this run (the others were there)
    seconds: float

    def __str__(self) -> str:
        done = self.parts - self.translated
        kept = f", {done} found done" if done else ""
        return (
            f"{self.lines} lines in {self.parts} parts ({self.translated} translated now"
            f"{kept}) in {self.seconds:.1f}s"
        )


def part_path(parts: Path, index: int) -> Path:
    """Part ``index`` (0-based) of a job: ``part.000000.out``, names that sort in order."""
    return parts / f"part.{index:06d}.out"


def fingerprint(path: str | Path) -> dict[str, Any]:
    """A file's size and BLAKE2b digest, or a directory's (an export: its files', by name):
    what identifies a source or a model."""
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    digest, size = hashlib.blake2b(digest_size=16), 0
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else "").encode() + b"\0")
        try:
            with open(file, "rb") as handle:
                while block := handle.read(1 << 20):
                    digest.update(block)
                    size += len(block)
        except OSError as err:
            raise MtkitError(f"{file}: cannot read ({err.strerror or err})") from None
    return {"bytes": size, "blake2b": digest.hexdigest()}


def describe_job(checkpoints: list[str], source: str, config: DistillConfig) -> dict[str, Any]:
    """What the parts of this job are made from (job.json)."""
    models = [fingerprint(path) for path in checkpoints]
    return {"source": fingerprint(source), "models": models, **config.job()}


def open_parts(parts: Path, job: dict[str, Any]) -> None:
    """Make the parts directory for ``job``, or check that the one there belongs to it."""
    record = parts / JOB
    if record.is_file():
        try:
            found = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise MtkitError(
                f"{record}: unreadable ({err}); remove {parts} to start again"
            ) from None
        differ = sorted(key for key in {**job, **found} if job.get(key) != found.get(key))
        if differ:
            raise MtkitError(
                f"{parts} holds the parts of another job (its {', '.join(differ)} "
                f"differ{'s' if len(differ) == 1 else ''}): remove it to start "
                "again, or give another --parts-dir"
            )
        return
    if parts.exists() and (not parts.is_dir() or any(parts.iterdir())):
        raise MtkitError(
            f"{parts}: exists and is not a parts directory of mtkit distill "
            f"(no {JOB}); remove it or give another --parts-dir"
        )
    with staged_file(record) as handle:
        handle.write(json.dumps(job, indent=1).encode("utf-8"))


def count_lines(path: Path) -> int:
    """Lines of a part file (each ends in ``\\n``)."""
    with open(path, "rb") as handle:
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))


def _check_paths(checkpoints: list[str], source: str, output: str) -> None:
    if source == "-" or output == "-":
        raise MtkitError(
            "mtkit distill reads its input again when resumed: give files to -i and -o, not '-'"
        )
    if not Path(source).exists():
        raise MtkitError(f"{source}: no such file")
    if not Path(source).is_file():
        raise MtkitError(
            f"{source}: not a regular file (mtkit distill reads it again when resumed)"
        )
    for path in checkpoints:
        if not Path(path).exists():
            raise MtkitError(f"{path}: no such file or directory")
    if Path(output).is_dir():
        raise MtkitError(f"{output}: is a directory")


def distill_corpus(
    checkpoints: list[str],
    source: str,
    output: str,
    config: DistillConfig,
    report: Report | None = None,
) -> DistillStats:
    """Translate ``source`` with ``checkpoints`` (an ensemble when several) into ``output``,
    part by part (see the module docstring); ``report`` hears a line per part.

    SIGINT or SIGTERM raise :class:`Interrupted` with ``lines`` the source lines whose parts
    are finished; run again, it goes on from there."""
    _check_paths(checkpoints, source, output)
    start = time.perf_counter()
    parts = Path(config.parts_dir or f"{output}.parts")
    open_parts(parts, describe_job(checkpoints, source, config))
    translated = lines = 0  # lines: the source lines whose parts are finished
    with SignalGuard(), naming_output(str(parts)):
        engine: Engine | None = None
        try:
            for index, part in enumerate(_parts(source, config.part_lines)):
                path = part_path(parts, index)
                if not (path.is_file() and count_lines(path) == len(part)):
                    engine = engine or load_engine(checkpoints, config.translate)
                    seconds = _translate_part(engine, part, lines + 1, path)
                    translated += 1
                    if report is not None:
                        report(
                            f"part {index + 1} (lines {lines + 1}-{lines + len(part)}) "
                            f"translated in {seconds:.1f}s"
                        )
                lines += len(part)
        except Interrupted as err:
            err.lines = lines
            raise
        _join(parts, index_count(lines, config.part_lines), output, lines)
    if not config.keep_parts:
        shutil.rmtree(parts, ignore_errors=True)
    return DistillStats(
        lines, index_count(lines, config.part_lines), translated, time.perf_counter() - start
    )


def index_count(lines: int, part_lines: int) -> int:
    """Parts that ``lines`` source lines make."""
    return -(-lines // part_lines)


def _parts(source: str, size: int) -> Iterator[list[str]]:
    with open(source, "rb") as handle:
        lines = read_lines(handle)
        while part := list(islice(lines, size)):
            yield part


def _translate_part(engine: Engine, part: list[str], first: int, path: Path) -> float:
    """Translate ``part`` (line ``first`` on, for warnings) into ``path``, whole or not at all;
    returns the seconds it took."""
    start, size = time.perf_counter(), engine.config.chunk_lines
    with staged_file(path) as handle:
        for at in range(0, len(part), size):
            handle.write(translate_chunk(engine, part[at : at + size], first + at).encode("utf-8"))
    return time.perf_counter() - start


def _join(parts: Path, count: int, output: str, lines: int) -> None:
    """Write the parts, in order, into ``output`` (whole or not at all), lines in = lines out."""
    with staged_file(output) as out:
        written = sum(_copy(part_path(parts, index), out) for index in range(count))
        if written != lines:  # pragma: no cover - a part changed under us
            raise MtkitError(
                f"{parts}: the parts hold {written} lines for {lines} source lines; "
                "remove it and run again"
            )


def _copy(path: Path, out: BinaryIO) -> int:
    """Append part ``path`` to ``out``; returns its lines."""
    with open(path, "rb") as handle:
        shutil.copyfileobj(handle, out)
    return count_lines(path)
