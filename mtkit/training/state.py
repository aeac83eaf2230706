"""Training state that a checkpoint must carry for an exact resume, and the run's checkpoint files.

Files of a run directory::

    checkpoint_{update}.pt   every save_every updates; the newest keep_last are kept
    checkpoint_last.pt       the newest state: the newest numbered checkpoint (a hard link when
                             the file system allows), or its own file when the update has none
    checkpoint_best.pt       best validation BLEU (or loss with validate_bleu false), linked
                             like checkpoint_last.pt
    .checkpoint_*.tmp        a write in progress (renamed when complete; a killed run's are
                             removed when training starts again)

Beyond the model, `mtkit train`'s checkpoints hold a :class:`mtkit.checkpoint.ResumeState`:
the optimizer's, schedule's and scaler's state dicts, ``rng`` (one entry per rank: torch CPU,
CUDA and Python ``random`` states) and ``state`` (:class:`TrainState` as a dict: update, epoch and
batches consumed in it, best metric, patience count, skipped batches and steps, elapsed seconds, the
validation history, the loss sums of the next train record).
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from mtkit.checkpoint import Checkpoint

LAST, BEST = "checkpoint_last.pt", "checkpoint_best.pt"
NUMBERED = re.compile(r"^checkpoint_(\d+)\.pt$")


@dataclass
class TrainState:
    update: int = 0
    epoch: int = 1  # the epoch in progress, from 1
    consumed: int = 0  # batches of that epoch already trained on
    best: float | None = None  # best validation metric so far
    bad_validations: int = 0  # validations since the last improvement
    skipped: int = 0  # batches skipped for a non-finite loss (nan_policy skip)
    overflows: int = 0  # steps the fp16 gradient scaler skipped (not updates)
    elapsed: float = 0.0  # training wall-clock seconds, across resumes
    precision: str = ""  # what the run trains in (fp32, bf16, fp16); auto keeps it on resume
    history: list[dict[str, Any]] = field(default_factory=list)  # validation records
    # sums since the last train record, which averages them over log_every updates
    log_loss: float = 0.0
    log_nll: float = 0.0
    log_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainState:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def rng_state() -> dict[str, Any]:
    """Every random state this process's training draws from."""
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    random.setstate(tuple(state["python"]))  # type: ignore[arg-type]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)  # seeds every CUDA device too


def numbered_checkpoints(run_dir: str | Path) -> list[Path]:
    """checkpoint_{update}.pt files of a run, oldest (lowest update) first."""
    found = []
    for path in Path(run_dir).iterdir():
        match = NUMBERED.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def _link_or_copy(src: Path, dst: Path) -> None:
    """Make ``dst`` the same file as ``src`` atomically (hard link, else a copy) and replace."""
    tmp = dst.with_name(f".{dst.name}.link.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


class CheckpointDir:
    """Writes checkpoints into a run directory and prunes old numbered ones."""

    def __init__(self, run_dir: str | Path, keep_last: int) -> None:
        self.run_dir = Path(run_dir)
        self.keep_last = keep_last

    def save(self, ckpt: Checkpoint, update: int, numbered: bool, best: bool) -> None:
        """checkpoint_last.pt, through checkpoint_{update}.pt when ``numbered``; and
        checkpoint_best.pt, the same file, when ``best``."""
        path = self.run_dir / (f"checkpoint_{update}.pt" if numbered else LAST)
        ckpt.save(path)
        if numbered:
            _link_or_copy(path, self.run_dir / LAST)
            self.prune()
        if best:
            _link_or_copy(path, self.run_dir / BEST)

    def remove_temporaries(self) -> None:
        """Delete partial files of writes a kill interrupted (``.checkpoint_*.tmp``)."""
        for path in self.run_dir.glob(".checkpoint_*.tmp"):
            path.unlink(missing_ok=True)

    def prune(self) -> None:
        if self.keep_last <= 0:
            return
        for path in numbered_checkpoints(self.run_dir)[: -self.keep_last]:
            path.unlink(missing_ok=True)
