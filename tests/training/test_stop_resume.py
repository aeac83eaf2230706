"""A run stopped by a budget (or a signal) and resumed is the run that never stopped, in every file
of its run directory: checkpoints (numbered, last, best), history, patience, metrics log."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from subprocess_helpers import assert_same_run_dir
from training_helpers import train_args

from mtkit.checkpoint import load_checkpoint
from mtkit.training import loop

# 6 batches per epoch; validations at 4, 8, 12; numbered checkpoints at 3, 6, 9, 12 (the last
# two kept); a train record every 5 updates, averaging the loss over them
OPTIONS = [
    "--max-tokens",
    "512",
    "--max-updates",
    "12",
    "--max-time",
    "0",
    "--max-epochs",
    "0",
    "--validate-every",
    "4",
    "--save-every",
    "3",
    "--keep-last",
    "2",
    "--patience",
    "5",
    "--set",
    "validate_bleu=false",
    "--set",
    "log_every=5",
]
CHANGED = frozenset({"max_updates", "max_epochs", "max_time", "run_dir"})


@pytest.mark.parametrize(
    "first, stopped_at",
    [
        (["--max-updates", "5"], 5),  # neither a save nor a validation is due
        (["--max-updates", "6"], 6),  # a save is due
        (["--max-updates", "8"], 8),  # a validation is due
        (["--max-time", "1e-6"], 1),
        (["--max-epochs", "1"], 6),  # the end of the first epoch
        ([], 8),  # SIGTERM during update 7: stops after update 8 (validation due)
    ],
)
def test_stop_and_resume_is_invisible(
    tmp_path: Path, tiny_dataset: Path, mtkit, monkeypatch, first: list[str], stopped_at: int
) -> None:
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert mtkit(*train_args(tiny_dataset, straight, *OPTIONS)).exit_code == 0
    if not first:  # a signal
        real = loop.Trainer._report

        def report_then_signal(self, *args):
            real(self, *args)
            if self.state.update == 7:
                os.kill(os.getpid(), signal.SIGTERM)

        monkeypatch.setattr(loop.Trainer, "_report", report_then_signal)
    result = mtkit(*train_args(tiny_dataset, stopped, *OPTIONS, *first))
    assert result.exit_code == (0 if first else 128 + signal.SIGTERM), result.output
    monkeypatch.undo()
    assert load_checkpoint(stopped / "checkpoint_last.pt")["update"] == stopped_at
    result = mtkit(*train_args(tiny_dataset, stopped, *OPTIONS))
    assert result.exit_code == 0 and "stopped at update 12" in result.output, result.output
    assert_same_run_dir(straight, stopped, CHANGED)
    ckpt = load_checkpoint(stopped / "checkpoint_last.pt")
    assert [r["update"] for r in ckpt["state"]["history"]] == [4, 8, 12]
    names = ["checkpoint_12.pt", "checkpoint_9.pt", "checkpoint_best.pt", "checkpoint_last.pt"]
    assert sorted(p.name for p in stopped.glob("checkpoint_*.pt")) == names
