"""Helpers the translate CLI tests share: a tiny checkpoint, fast search options, a run of
`mtkit translate` through click."""

from __future__ import annotations

import random
from pathlib import Path

from click.testing import CliRunner
from random_models import random_checkpoint

from mtkit.cli import cli

FAST = ["--beam", "2", "--max-len-a", "0", "--max-len-b", "4", "--threads", "1"]

WORDS = "a man woman dog cat runs sits on the red blue street house ball plays".split()


def make_checkpoint(path: Path, spm_seed: int = 0) -> str:
    """A random-weight model with spm models trained on a small synthetic corpus."""
    rng = random.Random(spm_seed)
    text = [" ".join(rng.choices(WORDS, k=rng.randint(2, 9))) for _ in range(300)]
    return random_checkpoint(path, text, max_positions=64)


def run(args: list[str], stdin: bytes | None = None):
    return CliRunner().invoke(cli, ["translate", *args], input=stdin)
