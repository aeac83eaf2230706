"""Exact resume: a run killed with SIGKILL and resumed ends bitwise equal to an uninterrupted one;
a run directory refuses a config that changes what training computes."""

from __future__ import annotations

import signal
from pathlib import Path

from subprocess_helpers import assert_same_run, run_mtkit
from training_helpers import train_args

from mtkit.checkpoint import load_checkpoint

KILL = {"MTKIT_TEST_KILL_AT_UPDATE": "6"}  # slow_mtkit.py's


def test_sigkill_and_resume_is_bitwise_identical(tmp_path: Path, tiny_dataset: Path) -> None:
    # dropout on, validation, and epoch boundaries after the resume point
    options = [
        "--max-tokens",
        "512",
        "--max-updates",
        "14",
        "--save-every",
        "4",
        "--validate-every",
        "4",
        "--set",
        "validate_bleu=false",
        "--set",
        "log_every=1",
    ]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    done = run_mtkit(train_args(tiny_dataset, straight, *options))
    assert done.returncode == 0, done.stderr
    crash = run_mtkit(train_args(tiny_dataset, killed, *options), env=KILL, slow=True)
    assert crash.returncode == -signal.SIGKILL
    assert load_checkpoint(killed / "checkpoint_last.pt")["update"] == 4
    resumed = run_mtkit(train_args(tiny_dataset, killed, *options))
    assert resumed.returncode == 0, resumed.stderr
    a, _ = assert_same_run(straight, killed)
    assert a["update"] == 14 and a["state"]["epoch"] >= 2


def test_resume_refuses_another_config(
    tmp_path: Path, tiny_dataset: Path, mtkit, make_tiny_dataset, tiny_word_pairs
) -> None:
    run = tmp_path / "run"
    assert mtkit(*train_args(tiny_dataset, run, "--max-updates", "2")).exit_code == 0
    for extra, culprit in [
        (["--seed", "7"], "seed 1 -> 7"),
        (["--max-tokens", "256"], "max_tokens 128 -> 256"),
        (["--set", "model.d_model=64"], "model.d_model 32 -> 64"),
        (["--preset", "transformer-base"], "preset"),
        (["--label-smoothing", "0"], "label_smoothing"),
    ]:
        result = mtkit(*train_args(tiny_dataset, run, "--max-updates", "3", *extra))
        assert result.exit_code == 1, extra
        assert culprit in result.output and "Traceback" not in result.output
        assert result.output.count("\n") == 1
    other = make_tiny_dataset("other", tiny_word_pairs(80, 9), tiny_word_pairs(4, 3), vocab_size=50)
    result = mtkit(*train_args(other, run, "--max-updates", "3"))
    assert result.exit_code == 1 and "data" in result.output
    # budget fields may change; the run dir alone is enough to resume
    result = mtkit("train", "--run-dir", str(run), "--max-updates", "4", "--patience", "3", "-q")
    assert result.exit_code == 0 and "stopped at update 4" in result.output, result.output
