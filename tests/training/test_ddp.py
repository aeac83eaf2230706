"""DDP on CPU (gloo, 2 processes via torchrun) computes the updates of one process that
accumulates 2 batches per update, over the same data, epoch ends included."""

from __future__ import annotations

import gc
from pathlib import Path

import torch
from subprocess_helpers import run_mtkit
from training_helpers import train_args

from mtkit.checkpoint import load_checkpoint
from mtkit.data.binarized import ParallelData
from mtkit.training import distributed as D
from mtkit.training.batching import epoch_batches, sentence_sizes
from mtkit.training.step import Stepper

TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
NO_DROPOUT = ["--set", "model.dropout=0", "--set", "model.attention_dropout=0"]


def odd_batch_budget(data: Path) -> int:
    """A max_tokens whose first epoch has an odd number of batches: its last update has one
    batch, so rank 1 must run a zero-weight stand-in."""
    train = ParallelData(data, "train")
    sizes = sentence_sizes(train.src_lengths, train.tgt_lengths)
    for max_tokens in range(400, 700, 20):
        if len(epoch_batches(sizes, max_tokens, seed=1, epoch=1)) % 2:
            return max_tokens
    raise AssertionError("no budget with an odd batch count")


def test_two_processes_equal_update_freq_two(tmp_path: Path, tiny_dataset: Path) -> None:
    max_tokens = odd_batch_budget(tiny_dataset)
    # validation and checkpoints on the way: rank 0 alone decodes and writes, the others wait
    options = [
        "--max-tokens",
        str(max_tokens),
        "--max-updates",
        "6",
        "--validate-every",
        "3",
        "--save-every",
        "3",
        *NO_DROPOUT,
    ]
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    one = run_mtkit(train_args(tiny_dataset, single, *options, "--update-freq", "2"))
    assert one.returncode == 0, one.stderr
    two = run_mtkit(train_args(tiny_dataset, ddp, *options), launcher=TORCHRUN)
    assert two.returncode == 0, two.stdout + two.stderr
    assert two.stdout.count("stopped at update 6") == 1  # rank 0 alone reports
    a = load_checkpoint(single / "checkpoint_last.pt")
    b = load_checkpoint(ddp / "checkpoint_last.pt")
    assert a["state"]["epoch"] == b["state"]["epoch"] >= 2
    assert len(b["rng"]) == 2  # every rank's random state
    assert [r["update"] for r in b["state"]["history"]] == [3, 6]
    for ra, rb in zip(a["state"]["history"], b["state"]["history"], strict=True):
        assert abs(ra["valid_loss"] - rb["valid_loss"]) < 1e-4
    for name, tensor in a["model"].items():
        torch.testing.assert_close(b["model"][name], tensor, rtol=0, atol=1e-5, msg=name)


def test_the_model_is_freed_before_the_process_group_closes(
    tmp_path: Path, tiny_dataset: Path, mtkit, monkeypatch
) -> None:
    """DDP's reducer freed after the group was destroyed destroyed it itself, with the GIL held,
    and could hang (distributed.close_group): train() drops its model first."""
    alive = []

    def close_group(where) -> None:
        gc.collect()
        alive.append(sum(isinstance(o, Stepper) for o in gc.get_objects()))

    monkeypatch.setattr(D, "close_group", close_group)
    result = mtkit(*train_args(tiny_dataset, tmp_path / "run", "--max-updates", "2"))
    assert result.exit_code == 0, result.output
    assert alive == [0]
