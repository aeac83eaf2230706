"""Shared by the training tests: a tiny model's options and `mtkit train` arguments."""

from __future__ import annotations

from pathlib import Path

# a model that trains in milliseconds per update on a CPU
TINY_MODEL = [
    "--set",
    "model.d_model=32",
    "--set",
    "model.ffn_dim=64",
    "--set",
    "model.heads=2",
    "--set",
    "model.encoder_layers=1",
    "--set",
    "model.decoder_layers=1",
]


def train_args(data: Path, run_dir: Path, *extra: str) -> list[str]:
    """`mtkit train` arguments for a short quiet CPU run of the tiny model."""
    return [
        "train",
        "--data",
        str(data),
        "--run-dir",
        str(run_dir),
        "--device",
        "cpu",
        "--max-tokens",
        "128",
        "--lr",
        "2e-3",
        "--warmup-updates",
        "4",
        "--validate-every",
        "0",
        "--save-every",
        "0",
        "-q",
        *TINY_MODEL,
        *extra,
    ]
