"""`mtkit spm train`: sentencepiece BPE models with mtkit's fixed special ids."""

from __future__ import annotations

from functools import partial
from typing import Any

import click

from mtkit.cli.common import config_option, user_errors
from mtkit.config import SpmConfig

option = partial(config_option, config=SpmConfig)  # default and --help from SpmConfig


@click.group()
def spm() -> None:
    """Sentencepiece models (BPE, special ids pad=0 unk=1 bos=2 eos=3)."""


@spm.command("train")
@click.argument("inputs", nargs=-1, metavar="[FILES]...")
@click.option("--model-prefix", required=True, help="Writes PREFIX.model and PREFIX.vocab.")
@option("--vocab-size", type=int)
@option(
    "--character-coverage",
    type=float,
    help="Share of characters covered (lower for CJK-size alphabets).",
)
@option(
    "--input-sentence-size",
    type=int,
    help="Sample this many sentences for training (0: all).",
)
@option(
    "--byte-fallback",
    is_flag=True,
    help="Characters outside the vocabulary become their UTF-8 bytes (256 pieces <0x00>..<0xFF>, "
    "part of --vocab-size), not UNK.",
)
@option("--seed", type=int)
@option("--threads", field="num_threads", type=int)
@option(
    "--train",
    "--train-prefix",
    metavar="SOURCE",
    help="Instead of FILES: a corpus as `mtkit prepare` reads it (PREFIX, FILE.tsv, "
    "FILE.parquet/.jsonl, a saved dataset dir, hf:NAME).",
)
@option("--src-lang", help="Source language (with --train).")
@option("--tgt-lang", help="Target language (with --train).")
@option(
    "--joint/--separate",
    help="With --train: one model PREFIX.model, or PREFIX.SRC.model + PREFIX.TGT.model.",
)
@option(
    "--pair",
    field="pairs",
    multiple=True,
    metavar="SRC-TGT=SOURCE",
    help="Instead: one corpus of a multilingual model (repeat); one joint model with a "
    ">>TGT<< tag per target language.",
)
@option("--format", type=click.Choice(["auto", "text", "tsv", "hf"]), help="How to read --train.")
@option("--hf-config", help="HF dataset configuration, e.g. de-en.")
def train(inputs: tuple[str, ...], **options: Any) -> None:
    """Train a BPE model on text FILES, or on both sides (or each side) of a corpus."""
    from mtkit.pipeline.spm import summary, train_models

    with user_errors():
        click.echo(summary(train_models(SpmConfig(inputs=list(inputs), **options))))
