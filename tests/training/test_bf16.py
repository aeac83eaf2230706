"""bf16 training on CPU: autocast around the forward pass, fp32 master weights in checkpoints,
bitwise resume, and a loss that tracks fp32's; what auto picks, and the emulation warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from subprocess_helpers import assert_same_run
from training_helpers import train_args

from mtkit import cpu
from mtkit.checkpoint import load_checkpoint
from mtkit.errors import MtkitError
from mtkit.training import distributed as D

CPU = torch.device("cpu")
AVX2, AVX512_BF16 = frozenset({"avx2"}), frozenset({"avx2", "avx512f", "avx512_bf16"})


def losses(run_dir: Path) -> list[float]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in records if "loss" in r]


def test_cpu_precision_from_flags() -> None:
    assert D.resolve_precision("fp32", CPU, AVX512_BF16).dtype is None
    slow = D.resolve_precision("bf16", CPU, AVX2)
    assert slow.dtype == torch.bfloat16 and "emulated" in slow.warning
    assert D.resolve_precision("bf16", CPU, AVX512_BF16).warning == ""
    auto = D.resolve_precision("auto", CPU, AVX2)
    assert auto.dtype is None and "no bf16 hardware" in auto.reason
    with pytest.raises(MtkitError, match="fp16 needs a CUDA device"):
        D.resolve_precision("fp16", CPU, AVX512_BF16)


def test_bf16_loss_tracks_fp32(tmp_path: Path, tiny_dataset: Path, mtkit) -> None:
    """Same seed, data and updates; only the matmuls' precision differs. bf16 keeps 8 bits of
    mantissa (relative rounding 2^-9 = 0.2% per value); products accumulate in fp32 and the
    loss, softmax and norms stay fp32 under autocast, so the per-update loss differs by
    rounding noise that the optimizer does not amplify over a short run. Measured: 0.07% at
    most over these 24 updates (AMD Zen 4, AVX512-BF16; emulation rounds the same way); we
    allow 2%, and ask for the same downward trend."""
    options = ["--max-updates", "24", "--set", "log_every=1"]
    runs = {}
    for precision in ("fp32", "bf16"):
        run = tmp_path / precision
        result = mtkit(*train_args(tiny_dataset, run, "--precision", precision, *options))
        assert result.exit_code == 0, result.output
        runs[precision] = losses(run)
    fp32, bf16 = runs["fp32"], runs["bf16"]
    assert len(fp32) == len(bf16) == 24 and fp32 != bf16  # bf16 really ran
    worst = max(abs(a - b) / a for a, b in zip(fp32, bf16, strict=True))
    assert worst < 0.02, worst
    assert bf16[-1] < bf16[0] - 0.5 and fp32[-1] < fp32[0] - 0.5


def test_bf16_checkpoints_are_fp32_and_resume_bitwise(
    tmp_path: Path, tiny_dataset: Path, mtkit
) -> None:
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    bf16 = ["--precision", "bf16", "--max-tokens", "256", "--set", "log_every=1"]
    assert mtkit(*train_args(tiny_dataset, straight, *bf16, "--max-updates", "8")).exit_code == 0
    assert mtkit(*train_args(tiny_dataset, resumed, *bf16, "--max-updates", "4")).exit_code == 0
    assert mtkit(*train_args(tiny_dataset, resumed, *bf16, "--max-updates", "8")).exit_code == 0
    ckpt, _ = assert_same_run(straight, resumed)
    weights = ckpt["model"].values()
    assert all(t.dtype == torch.float32 for t in weights if t.is_floating_point())
    assert load_checkpoint(straight / "checkpoint_last.pt")["train_config"]["precision"] == "bf16"


def test_the_first_lines_say_which_precision_and_why(
    tmp_path: Path, tiny_dataset: Path, mtkit, monkeypatch
) -> None:
    monkeypatch.setattr(D, "cpu_flags", lambda: AVX2)  # a CPU without bf16 hardware
    args = [a for a in train_args(tiny_dataset, tmp_path / "a", "--max-updates", "1") if a != "-q"]
    out = mtkit(*args).output
    assert "precision: fp32 (auto: this CPU has no bf16 hardware" in out
    args = train_args(tiny_dataset, tmp_path / "b", "--max-updates", "1", "--precision", "bf16")
    result = mtkit(*args)  # quiet, and still the one warning
    assert result.exit_code == 0
    warnings = [line for line in result.output.splitlines() if "warning" in line]
    assert warnings == [
        "mtkit train: warning: bf16 on a CPU without bf16 hardware (no "
        "avx512_bf16 or amx_bf16): emulated in software, slower than fp32"
    ]


def test_a_resumed_auto_run_keeps_its_precision(
    tmp_path: Path, tiny_dataset: Path, mtkit, monkeypatch
) -> None:
    """auto's choice may change between a run's start and its resume (a new ablation verdict in
    mtkit/cpu.py): the resumed run goes on in the precision it trained in, says so, and equals
    the uninterrupted run; a new run takes the new choice."""
    monkeypatch.setattr(D, "cpu_flags", lambda: AVX512_BF16)
    monkeypatch.setitem(cpu.ABLATION, "train", {"avx512_bf16": cpu.Verdict(False, "-1 BLEU")})
    opts = ["--max-tokens", "256", "--set", "log_every=1"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert mtkit(*train_args(tiny_dataset, straight, *opts, "--max-updates", "6")).exit_code == 0
    assert mtkit(*train_args(tiny_dataset, resumed, *opts, "--max-updates", "3")).exit_code == 0
    monkeypatch.setitem(cpu.ABLATION, "train", {"avx512_bf16": cpu.Verdict(True, "+1 BLEU")})
    loud = [a for a in train_args(tiny_dataset, resumed, *opts, "--max-updates", "6") if a != "-q"]
    result = mtkit(*loud)
    assert result.exit_code == 0, result.output
    assert (
        "precision: fp32 (auto: the run's precision so far, kept on resume; a new run would "
        "pick bf16)"
    ) in result.output
    ckpt, _ = assert_same_run(straight, resumed)
    assert ckpt["state"]["precision"] == "fp32"
    fresh = [
        a
        for a in train_args(tiny_dataset, tmp_path / "new", *opts, "--max-updates", "1")
        if a != "-q"
    ]
    new_run = mtkit(*fresh).output
    assert "precision: bf16 (auto: avx512_bf16 present and bf16 matched fp32" in new_run
