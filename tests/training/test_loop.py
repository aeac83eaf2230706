"""The training loop in-process: overfitting, checkpoints, stop conditions, NaN guard, signals."""

from __future__ import annotations

import json
import math
import os
import signal
from pathlib import Path

import pytest
import torch
import yaml
from subprocess_helpers import assert_same_run
from training_helpers import train_args

from mtkit.checkpoint import load_checkpoint, load_for_inference
from mtkit.config import SearchConfig
from mtkit.data.binarized import ParallelData
from mtkit.data.tokenizer import EOS_ID, PAD_ID
from mtkit.training import compiled, loop


def read_log(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_overfits_and_reproduces_the_training_pairs(
    tmp_path: Path, mtkit, make_tiny_dataset, tiny_word_pairs
) -> None:
    """50 short pairs, no dropout or smoothing: greedy decoding returns every target exactly."""
    pairs = tiny_word_pairs(50, seed=5, min_words=2, max_words=4)
    data = make_tiny_dataset("data", pairs, pairs, vocab_size=48)
    run = tmp_path / "run"
    options = [
        "--max-tokens",
        "256",
        "--lr",
        "5e-3",
        "--warmup-updates",
        "10",
        "--max-updates",
        "200",
        "--validate-every",
        "200",
        "--label-smoothing",
        "0",
        "--set",
        "model.dropout=0",
        "--set",
        "model.attention_dropout=0",
        "--set",
        "model.encoder_layers=2",
        "--set",
        "model.decoder_layers=2",
    ]
    result = mtkit(*train_args(data, run, *options))
    assert result.exit_code == 0, result.output
    assert "best valid BLEU 100" in result.output
    from mtkit.decoding.search import generate

    loaded = load_for_inference(run / "checkpoint_last.pt")
    train = ParallelData(data, "train")
    src = [torch.tensor([*train.pair(i)[0].tolist(), EOS_ID]) for i in range(len(train))]
    batch = torch.nn.utils.rnn.pad_sequence(src, batch_first=True, padding_value=PAD_ID)
    hyps = generate([loaded.model], batch, SearchConfig(beam=1))
    for i, best in enumerate(hyps):
        assert best[0].tokens == train.pair(i)[1].tolist()
    assert loaded.tgt_tokenizer.decode([h[0].tokens for h in hyps]) == [t for _, t in pairs]


def test_checkpoints_describe_themselves(tmp_path: Path, tiny_dataset: Path, mtkit) -> None:
    run = tmp_path / "run"
    args = train_args(
        tiny_dataset,
        run,
        "--max-updates",
        "5",
        "--save-every",
        "1",
        "--keep-last",
        "2",
        "--set",
        "log_every=2",
    )
    result = mtkit(*args)
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in run.iterdir())
    assert names == [
        "checkpoint_4.pt",
        "checkpoint_5.pt",
        "checkpoint_last.pt",
        "config.yaml",
        "metrics.jsonl",
    ]
    ckpt = load_checkpoint(run / "checkpoint_last.pt")
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert ckpt["model_config"] == saved.pop("model") and ckpt["train_config"] == saved
    assert ckpt["model_config"]["share_all_embeddings"]  # the dataset's vocabulary is joint
    assert ckpt["spm"]["src"] == (tiny_dataset / "spm.src.model").read_bytes()
    assert ckpt["update"] == 5 and ckpt["state"]["update"] == 5
    assert {"optimizer", "scheduler", "scaler", "rng", "state"} <= set(ckpt)
    train_records = [r for r in read_log(run) if "loss" in r]
    assert [r["update"] for r in train_records] == [2, 4]
    keys = {"update", "epoch", "loss", "nll", "ppl", "lr", "tgt_tokens_per_s", "elapsed"}
    assert keys <= set(train_records[0])


def test_separate_vocabularies_do_not_share_embeddings(
    tmp_path: Path, mtkit, make_tiny_dataset, tiny_word_pairs
) -> None:
    pairs = tiny_word_pairs(60, 1)
    data = make_tiny_dataset("data", pairs, pairs[:4], joint=False, vocab_size=40)
    result = mtkit(*train_args(data, tmp_path / "run", "--max-updates", "1"))
    assert result.exit_code == 0, result.output
    ckpt = load_checkpoint(tmp_path / "run" / "checkpoint_last.pt")
    assert not ckpt["model_config"]["share_all_embeddings"]


def test_max_epochs_and_max_time(tmp_path: Path, tiny_dataset: Path, mtkit) -> None:
    result = mtkit(
        *train_args(tiny_dataset, tmp_path / "a", "--max-epochs", "2", "--max-tokens", "512")
    )
    assert result.exit_code == 0 and "max_epochs" in result.output, result.output
    ckpt = load_checkpoint(tmp_path / "a" / "checkpoint_last.pt")
    assert ckpt["state"]["epoch"] == 3 and ckpt["state"]["consumed"] == 0
    # a stop writes checkpoint_last.pt only: numbered checkpoints follow save_every (0: none)
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == ["checkpoint_last.pt", "config.yaml", "metrics.jsonl"]
    result = mtkit(*train_args(tiny_dataset, tmp_path / "b", "--max-time", "1e-6"))
    assert result.exit_code == 0 and "max_time" in result.output, result.output
    assert load_checkpoint(tmp_path / "b" / "checkpoint_last.pt")["update"] == 1


def test_worker_processes_train_the_same_weights(tmp_path: Path, tiny_dataset: Path, mtkit) -> None:
    """Batches loaded by two worker processes (what auto does on CUDA), over an epoch boundary,
    train bitwise the weights the training process's own loading does, and the log says how
    they were loaded."""
    runs = {"alone": [], "workers": ["--set", "num_workers=2"]}
    outputs = []
    for name, extra in runs.items():
        args = train_args(tiny_dataset, tmp_path / name, "--max-epochs", "2", "--max-tokens", "512")
        result = mtkit(*[a for a in args if a != "-q"], *extra, "--set", "log_every=1")
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    assert_same_run(tmp_path / "alone", tmp_path / "workers")
    assert "data loading: 0 worker process(es) (auto: on CPU" in outputs[0]
    assert "data loading: 2 worker process(es) (as asked)" in outputs[1]


def test_validation_best_and_early_stopping(
    tmp_path: Path, tiny_dataset: Path, mtkit, monkeypatch
) -> None:
    losses = iter([3.0, 2.0, 2.5, 2.6, 1.0])

    def fake_validate(*args, **kwargs) -> dict:
        value = next(losses)
        return {
            "valid_loss": value,
            "valid_nll": value,
            "valid_ppl": math.exp(value),
            "valid_bleu": None,
            "bleu_signature": None,
        }

    monkeypatch.setattr(loop, "validate", fake_validate)
    run = tmp_path / "run"
    result = mtkit(
        *train_args(
            tiny_dataset,
            run,
            "--validate-every",
            "1",
            "--patience",
            "2",
            "--max-updates",
            "50",
            "--set",
            "validate_bleu=false",
        )
    )
    assert result.exit_code == 0, result.output
    assert "early_stop" in result.output and "best valid loss 2" in result.output
    assert load_checkpoint(run / "checkpoint_best.pt")["update"] == 2
    assert load_checkpoint(run / "checkpoint_last.pt")["update"] == 4
    valid = [r for r in read_log(run) if "valid_loss" in r]
    assert [r["valid_loss"] for r in valid] == [3.0, 2.0, 2.5, 2.6]


def nan_at(calls: set[int], monkeypatch) -> None:
    """Make the loss of the given forward passes (counted from 1) NaN."""
    count = {"n": 0}

    def patch(name: str) -> None:  # the loss of logits, and the loss projecting hidden states
        real = getattr(compiled, name)

        def patched(*args):
            count["n"] += 1
            loss, nll = real(*args)
            if count["n"] in calls:
                return loss * math.nan, nll
            return loss, nll

        monkeypatch.setattr(compiled, name, patched)

    patch("label_smoothed_nll_loss")
    patch("projected_label_smoothed_nll_loss")


def test_nan_stops_and_names_the_resume_point(tmp_path: Path, tiny_dataset, mtkit, monkeypatch):
    nan_at({5}, monkeypatch)
    run = tmp_path / "run"
    result = mtkit(*train_args(tiny_dataset, run, "--max-updates", "10", "--save-every", "2"))
    assert result.exit_code == 1
    message = result.output.strip()
    assert message.count("\n") == 0 and "Traceback" not in message
    assert "loss is nan at update 5" in message and "checkpoint_last.pt (update 4)" in message
    assert load_checkpoint(run / "checkpoint_last.pt")["update"] == 4


def test_nan_skip_policy(tmp_path: Path, tiny_dataset: Path, mtkit, monkeypatch) -> None:
    nan_at({2, 3}, monkeypatch)
    run = tmp_path / "run"
    args = train_args(tiny_dataset, run, "--max-updates", "4", "--set", "nan_policy=skip")
    result = mtkit(*args)
    assert result.exit_code == 0, result.output
    state = load_checkpoint(run / "checkpoint_last.pt")["state"]
    assert state["skipped"] == 2 and state["update"] == 4
    nan_at({1, 2}, monkeypatch)
    options = ["--max-updates", "4", "--set", "nan_policy=skip", "--set", "max_skipped_batches=1"]
    result = mtkit(*train_args(tiny_dataset, tmp_path / "b", *options))
    assert result.exit_code == 1 and "more than max_skipped_batches=1" in result.output


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_checkpoints_and_exits(tmp_path: Path, tiny_dataset, mtkit, monkeypatch, signum):
    real = loop.Trainer._report

    def report_then_signal(self, *args):
        real(self, *args)
        if self.state.update == 3:
            os.kill(os.getpid(), signum)

    monkeypatch.setattr(loop.Trainer, "_report", report_then_signal)
    run = tmp_path / "run"
    result = mtkit(*train_args(tiny_dataset, run, "--max-updates", "50"))
    assert result.exit_code == 128 + signum, result.output
    assert f"interrupted by {signal.Signals(signum).name}" in result.output
    assert load_checkpoint(run / "checkpoint_last.pt")["update"] == 4  # the next boundary
    monkeypatch.setattr(loop.Trainer, "_report", real)
    result = mtkit(*train_args(tiny_dataset, run, "--max-updates", "6"))
    assert result.exit_code == 0 and "stopped at update 6" in result.output, result.output
