"""fp16: a step the gradient scaler skips (overflow) is not an update: the update counter and the
learning-rate schedule stay, and the skip is counted. On CPU, with a CPU GradScaler and gradients
made infinite at chosen forward passes."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from training_helpers import train_args

from mtkit.checkpoint import load_checkpoint
from mtkit.training import compiled

REAL_SCALER = torch.amp.GradScaler


class InfiniteGradient(torch.autograd.Function):
    """The identity, whose backward pass returns infinite gradients: an fp16 overflow."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad * float("inf")


def overflow_at(calls: set[int], monkeypatch) -> None:
    """An enabled gradient scaler on the CPU; the given forward passes (from 1) overflow."""
    monkeypatch.setattr(torch.amp, "GradScaler", lambda device, enabled: REAL_SCALER("cpu"))
    count = [0]

    def patch(name: str) -> None:  # the loss of logits, and the loss projecting hidden states
        real = getattr(compiled, name)

        def patched(*args):
            count[0] += 1
            loss, nll = real(*args)
            return (InfiniteGradient.apply(loss) if count[0] in calls else loss), nll

        monkeypatch.setattr(compiled, name, patched)

    patch("label_smoothed_nll_loss")
    patch("projected_label_smoothed_nll_loss")


def train_log(run: Path) -> list[dict]:
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if "loss" in r]


def test_a_skipped_step_is_not_an_update(tmp_path: Path, tiny_dataset: Path, mtkit, monkeypatch):
    args = ["--max-updates", "4", "--warmup-updates", "8", "--set", "log_every=1"]
    assert mtkit(*train_args(tiny_dataset, tmp_path / "plain", *args)).exit_code == 0
    overflow_at({2, 3}, monkeypatch)
    result = mtkit(*train_args(tiny_dataset, tmp_path / "fp16", *args))
    assert result.exit_code == 0, result.output
    ckpt = load_checkpoint(tmp_path / "fp16" / "checkpoint_last.pt")
    state = ckpt["state"]
    assert state["update"] == 4 and state["consumed"] == 6  # 6 batches, 2 of them skipped
    assert state["overflows"] == 2
    assert ckpt["scheduler"]["last_epoch"] == 4  # the schedule stepped once per update
    assert {s["step"].item() for s in ckpt["optimizer"]["state"].values()} == {4.0}
    assert ckpt["scaler"]["scale"] == 2.0**16 / 4  # halved at each skip
    log = train_log(tmp_path / "fp16")
    assert [r["update"] for r in log] == [1, 2, 3, 4]
    assert [r["lr"] for r in log] == [r["lr"] for r in train_log(tmp_path / "plain")]
    assert [r["overflows"] for r in log] == [0, 2, 2, 2]
    assert [r["loss_scale"] for r in log] == [2.0**16] + [2.0**14] * 3
