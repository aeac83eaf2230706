"""Exact resume: a run killed with SIGKILL and resumed ends bitwise equal to an uninterrupted one;
a run directory refuses a config that changes what training computes."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import torch
from subprocess_helpers import run_mtkit, tensors
from training_helpers import train_args

from mtkit.training.checkpoint import load_checkpoint

KILL = {"MTKIT_TEST_KILL_AT_UPDATE": "6"}


def train_records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    timing = ("elapsed", "tgt_tokens_per_s")
    return [{k: v for k, v in json.loads(line).items() if k not in timing} for line in lines]


def without_time(state: dict) -> dict:
    history = [{k: v for k, v in r.items() if k != "elapsed"} for r in state["history"]]
    return {**state, "elapsed": None, "history": history}


def test_sigkill_and_resume_is_bitwise_identical(tmp_path: Path, tiny_dataset: Path) -> None:
    # dropout on, validation, and epoch boundaries after the resume point
    options = ["--max-tokens", "512", "--max-updates", "14", "--save-every", "4",
               "--validate-every", "4", "--set", "validate_bleu=false",
               "--set", "log_every=1"]  # fmt: skip
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    done = run_mtkit(train_args(tiny_dataset, straight, *options))
    assert done.returncode == 0, done.stderr
    crash = run_mtkit(train_args(tiny_dataset, killed, *options), env=KILL)
    assert crash.returncode == -signal.SIGKILL
    assert load_checkpoint(killed / "checkpoint_last.pt")["update"] == 4
    resumed = run_mtkit(train_args(tiny_dataset, killed, *options))
    assert resumed.returncode == 0, resumed.stderr
    a = load_checkpoint(straight / "checkpoint_last.pt")
    b = load_checkpoint(killed / "checkpoint_last.pt")
    assert a["update"] == b["update"] == 14 and a["state"]["epoch"] >= 2
    ta, tb = (
        tensors({k: a[k] for k in ("model", "optimizer", "rng")}),
        tensors({k: b[k] for k in ("model", "optimizer", "rng")}),
    )
    assert ta.keys() == tb.keys() and len(ta) > 20
    for name in ta:
        assert torch.equal(ta[name], tb[name]), name
    assert a["scheduler"] == b["scheduler"]
    assert without_time(a["state"]) == without_time(b["state"])
    # the log holds each update once, with the same losses
    assert train_records(straight) == train_records(killed)


def test_resume_refuses_another_config(tmp_path: Path, tiny_dataset: Path, mtkit,
                                       make_tiny_dataset, tiny_word_pairs) -> None:  # fmt: skip
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
    other = make_tiny_dataset("other", tiny_word_pairs(80, 9), tiny_word_pairs(4, 3),
                              vocab_size=50)  # fmt: skip
    result = mtkit(*train_args(other, run, "--max-updates", "3"))
    assert result.exit_code == 1 and "data" in result.output
    # budget fields may change; the run dir alone is enough to resume
    result = mtkit("train", "--run-dir", str(run), "--max-updates", "4", "--patience", "3", "-q")
    assert result.exit_code == 0 and "stopped at update 4" in result.output, result.output
