"""Validation: pairs longer than max_tokens or the model's positions never stop training; a failing
validation loses no finished update, and the resumed run is the run that never failed."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from subprocess_helpers import assert_same_run
from training_helpers import train_args

from mtkit.checkpoint import load_checkpoint
from mtkit.config import ModelConfig, TrainConfig
from mtkit.errors import MtkitError
from mtkit.model.transformer import build_model
from mtkit.training import loop
from mtkit.training.validate import describe_plan, plan_validation, valid_loss

VALID = [
    "--validate-every",
    "4",
    "--save-every",
    "4",
    "--set",
    "validate_bleu=false",
    "--set",
    "log_every=1",
]


class Pairs:
    """An in-memory stand-in for a ParallelData split."""

    def __init__(self, pairs: list[tuple[list[int], list[int]]]) -> None:
        self.pairs = [(np.array(s, dtype=np.int64), np.array(t, dtype=np.int64)) for s, t in pairs]
        self.src_lengths = np.array([len(s) for s, _ in self.pairs], dtype=np.int64)
        self.tgt_lengths = np.array([len(t) for _, t in self.pairs], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.pairs)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self.pairs[i]


def ids(n: int, start: int) -> list[int]:
    return [4 + (start + k) % 40 for k in range(n)]


SHORT = [(ids(5, 1), ids(6, 2)), (ids(3, 7), ids(3, 8)), (ids(9, 3), ids(7, 5))]


@pytest.fixture(scope="module")
def small_model() -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = ModelConfig(
        src_vocab_size=48,
        tgt_vocab_size=48,
        d_model=16,
        ffn_dim=32,
        heads=2,
        encoder_layers=1,
        decoder_layers=1,
        max_positions=16,
    )
    return build_model(cfg).eval()


def loss_of(model: torch.nn.Module, pairs: list, max_tokens: int = 64) -> dict[str, float]:
    cfg = TrainConfig(max_tokens=max_tokens)
    return valid_loss(model, Pairs(pairs), cfg, torch.device("cpu"), None)  # type: ignore[arg-type]


def test_a_source_over_the_positions_is_truncated(small_model) -> None:
    long_source = (ids(30, 0), ids(4, 9))  # 30 pieces + EOS > 16 positions
    expected = loss_of(small_model, [*SHORT, (ids(15, 0), ids(4, 9))])
    assert loss_of(small_model, [*SHORT, long_source]) == expected


def test_a_target_over_the_positions_is_left_out_of_the_loss(small_model) -> None:
    long_target = (ids(4, 0), ids(16, 3))  # BOS + 16 pieces > 16 positions
    assert loss_of(small_model, [*SHORT, long_target]) == loss_of(small_model, SHORT)
    fits = (ids(4, 0), ids(15, 3))
    assert loss_of(small_model, [*SHORT, fits]) != loss_of(small_model, SHORT)


def test_a_pair_over_max_tokens_is_batched_alone(small_model) -> None:
    shapes = []

    class Recorder(torch.nn.Module):
        cfg = small_model.cfg

        def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
            shapes.append((*src.shape, tgt_in.shape[1]))
            return small_model(src, tgt_in)

    wide = (ids(12, 2), ids(14, 1))  # 15 tokens > max_tokens 14
    loss = loss_of(Recorder(), [*SHORT, wide], max_tokens=14)
    # sizes 7, 4, 10, 15 ascending: [4, 7] (2 x 7 = 14), [10], then 15 alone
    assert shapes == [(2, 6, 7), (1, 10, 8), (1, 13, 15)]
    assert math.isfinite(loss["valid_loss"])


@pytest.mark.parametrize(
    "lengths, expected",
    [
        ([(3, 4), (5, 5)], None),
        (
            [(3, 4), (20, 4), (20, 30), (4, 15), (14, 14)],
            "valid split (5 pairs): 2 sources "
            "longer than max_positions=16 allows will be truncated to their first 15 pieces; 1 "
            "target longer than 15 pieces will be left out of valid loss and perplexity (BLEU "
            "still scores its pair); 3 pairs over max_tokens=12 will each be batched alone",
        ),
        (
            [(4, 16)],
            "valid split (1 pair): 1 target longer than 15 pieces will be left out of "
            "valid loss and perplexity (BLEU still scores its pair)",
        ),
    ],
)
def test_the_plan_counts_each_kind(lengths, expected) -> None:
    data = Pairs([(ids(s, 0), ids(t, 0)) for s, t in lengths])
    plan = plan_validation(data, max_positions=16, max_tokens=12)  # type: ignore[arg-type]
    assert describe_plan(plan, max_positions=16, max_tokens=12) == expected


def test_long_valid_pairs_are_announced_and_validated(
    tmp_path: Path, mtkit, make_tiny_dataset, tiny_word_pairs
) -> None:
    """max_positions 200, max_tokens 128: a 60-word source fits the positions but not the batch
    budget; a 90-word source is truncated; a 90-word target is left out of the loss."""
    long60, long90 = tiny_word_pairs(1, 4, 60, 60)[0], tiny_word_pairs(1, 5, 90, 90)[0]
    short = tiny_word_pairs(4, 2)
    valid = [*short, (long60[0], short[0][1]), (long90[0], short[1][1]), (short[2][0], long90[1])]
    data = make_tiny_dataset("data", tiny_word_pairs(200, 1), valid)
    run = tmp_path / "run"
    args = train_args(data, run, "--max-updates", "4", "--set", "model.max_positions=200", *VALID)
    result = mtkit(*args)
    assert result.exit_code == 0, result.output
    assert (
        "mtkit train: warning: valid split (7 pairs): 1 source longer than max_positions=200 "
        "allows will be truncated to its first 199 pieces; 1 target longer than 199 pieces will "
        "be left out of valid loss and perplexity (BLEU still scores its pair); 2 pairs over "
        "max_tokens=128 will each be batched alone\n"
    ) in result.output
    history = load_checkpoint(run / "checkpoint_last.pt")["state"]["history"]
    assert [r["update"] for r in history] == [4]


def test_a_failing_validation_loses_no_update(
    tmp_path: Path, tiny_dataset: Path, mtkit, monkeypatch
) -> None:
    straight, failed = tmp_path / "straight", tmp_path / "failed"
    options = ["--max-updates", "10", *VALID]
    assert mtkit(*train_args(tiny_dataset, straight, *options)).exit_code == 0
    real, calls = loop.validate, []

    def fail_at_8(*args):
        calls.append(1)
        if len(calls) == 2:  # updates 4, 8
            raise MtkitError("validation failed")
        return real(*args)

    monkeypatch.setattr(loop, "validate", fail_at_8)
    result = mtkit(*train_args(tiny_dataset, failed, *options))
    assert result.exit_code == 1 and "validation failed" in result.output
    ckpt = load_checkpoint(failed / "checkpoint_last.pt")  # the run directory is kept
    assert ckpt["update"] == 8 and [r["update"] for r in ckpt["state"]["history"]] == [4]
    monkeypatch.setattr(loop, "validate", real)
    assert mtkit(*train_args(tiny_dataset, failed, *options)).exit_code == 0
    assert_same_run(straight, failed)  # update 8 was validated on resuming, before update 9


def test_a_fresh_run_failing_its_first_validation_keeps_its_directory(
    tmp_path: Path, tiny_dataset: Path, mtkit, monkeypatch
) -> None:
    def fail(*args):
        raise MtkitError("validation failed")

    monkeypatch.setattr(loop, "validate", fail)
    run = tmp_path / "new" / "run"
    result = mtkit(
        *train_args(
            tiny_dataset,
            run,
            "--max-updates",
            "10",
            "--validate-every",
            "2",
            "--set",
            "validate_bleu=false",
        )
    )
    assert result.exit_code == 1 and "validation failed" in result.output
    assert load_checkpoint(run / "checkpoint_last.pt")["update"] == 2
