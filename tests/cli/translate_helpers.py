"""Helpers the translate CLI tests share: a tiny checkpoint, fast search options, a run of
`mtkit translate` through click."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import torch
from click.testing import CliRunner

from mtkit.checkpoint import save_checkpoint
from mtkit.cli import cli
from mtkit.config import ModelConfig
from mtkit.data.tokenizer import train_spm
from mtkit.model.transformer import build_model

FAST = ["--beam", "2", "--max-len-a", "0", "--max-len-b", "4", "--threads", "1"]

WORDS = "a man woman dog cat runs sits on the red blue street house ball plays".split()


def make_checkpoint(path: Path, spm_seed: int = 0) -> str:
    """A random-weight model with spm models trained on a small synthetic corpus."""
    rng = random.Random(spm_seed)
    text = [" ".join(rng.choices(WORDS, k=rng.randint(2, 9))) for _ in range(300)]
    spm = train_spm(text, vocab_size=60)
    torch.manual_seed(0)
    cfg = ModelConfig(
        src_vocab_size=60,
        tgt_vocab_size=60,
        d_model=16,
        ffn_dim=32,
        heads=2,
        encoder_layers=1,
        decoder_layers=1,
        max_positions=64,
    )
    weights = build_model(cfg).state_dict()
    save_checkpoint(
        {
            "model_config": dataclasses.asdict(cfg),
            "model": weights,
            "spm": {"src": spm, "tgt": spm},
        },
        path,
    )
    return str(path)


def run(args: list[str], stdin: bytes | None = None):
    return CliRunner().invoke(cli, ["translate", *args], input=stdin)
