"""Training on several directions (issue 16): temperature sampling, exact resume, BLEU per
direction, and a tiny model that learns to follow the target-language tag."""

from __future__ import annotations

import json
from pathlib import Path

from subprocess_helpers import assert_same_run
from training_helpers import train_args

from mtkit.checkpoint import load_checkpoint

DIRECTIONS = ("en-de", "en-fr", "en-cs")


def read_log(run_dir: Path, kind: str) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    return [r for r in records if ("valid_loss" in r) == (kind == "valid")]


def test_interrupted_and_resumed_equals_straight(tmp_path: Path, multi_dataset: Path, mtkit):
    options = [
        "--max-tokens",
        "256",
        "--set",
        "pair_temperature=3",
        "--set",
        "log_every=1",
        "--validate-every",
        "4",
        "--set",
        "validate_bleu=false",
    ]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    done = mtkit(*train_args(multi_dataset, straight, *options, "--max-updates", "14"))
    assert done.exit_code == 0, done.output
    first = mtkit(*train_args(multi_dataset, resumed, *options, "--max-updates", "6"))
    assert first.exit_code == 0, first.output
    second = mtkit(*train_args(multi_dataset, resumed, *options, "--max-updates", "14"))
    assert second.exit_code == 0, second.output
    a, _ = assert_same_run(straight, resumed)
    assert a["state"]["epoch"] >= 2  # epochs resampled after the resume point
    assert a["train_config"]["pair_temperature"] == 3.0


def test_a_tiny_model_follows_the_tag(multi_run: Path) -> None:
    """The same English sources, three targets (de word by word, fr the same reversed, cs a
    copy): BLEU 100 in each direction needs the tag. BLEU per direction, the mean picks."""
    records = read_log(multi_run, "valid")
    last = records[-1]
    scores = [last[f"valid_bleu_{name}"] for name in DIRECTIONS]
    assert min(scores) > 99.99, last
    assert abs(last["valid_bleu"] - sum(scores) / 3) < 1e-9
    assert min(records[0][f"valid_bleu_{name}"] for name in DIRECTIONS) < 100
    best = load_checkpoint(multi_run / "checkpoint_best.pt")["state"]["best"]
    assert best == max(r["valid_bleu"] for r in records)
