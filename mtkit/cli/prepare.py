"""`mtkit prepare`: a parallel corpus -> cleaned, encoded, binarized dataset directory."""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

import click

from mtkit.cli.common import config_option, user_errors
from mtkit.config import PrepareConfig

option = partial(config_option, config=PrepareConfig)  # default and --help from PrepareConfig
_SOURCE_HELP = (
    "PREFIX (reads PREFIX.SRC and PREFIX.TGT), FILE.tsv, FILE.parquet/.json/.jsonl "
    "(translation schema), a saved dataset directory, or hf:NAME[:SPLIT]."
)


@click.command()
@option("--src-lang")
@option("--tgt-lang")
@option("--train", "--train-prefix", metavar="SOURCE", help=f"Train corpus: {_SOURCE_HELP}")
@option("--valid", "--valid-prefix", metavar="SOURCE", help="Validation corpus (same forms).")
@option("--test", "--test-prefix", metavar="SOURCE", help="Test corpus (same forms).")
@option(
    "--pair",
    field="pairs",
    multiple=True,
    metavar="SRC-TGT=SOURCE",
    help="Instead of --train: one corpus of a multilingual dataset (repeat); each source "
    "gets the tag >>TGT<<.",
)
@option(
    "--valid-pair",
    field="valid_pairs",
    multiple=True,
    metavar="SRC-TGT=SOURCE",
    help="Validation corpus of one direction (repeat).",
)
@option(
    "--test-pair",
    field="test_pairs",
    multiple=True,
    metavar="SRC-TGT=SOURCE",
    help="Test corpus of one direction (repeat).",
)
@option(
    "--spm",
    "--src-spm",
    field="src_spm",
    help="Sentencepiece model (joint), or the --model-prefix of `mtkit spm train`.",
)
@option("--tgt-spm", help="Target model, for separate vocabularies.")
@option(
    "--tokenizer-from",
    metavar="CKPT",
    help="Encode with a checkpoint's sentencepiece models and vocabulary (to fine-tune it).",
)
@option("-o", "--out-dir")
@option(
    "--format", type=click.Choice(["auto", "text", "tsv", "hf"]), help="How to read the sources."
)
@option("--hf-config", help="HF dataset configuration, e.g. de-en.")
@option(
    "--max-tokens",
    type=int,
    help="Train: drop pairs with more pieces on either side (0: off).",
)
@option(
    "--max-ratio",
    type=float,
    help="Train: drop pairs whose length ratio is above this (0: off).",
)
@option("--dedup/--no-dedup", help="Train: drop exact duplicate pairs.")
@option("--workers", type=int, help="Encoding processes (0: encode in the main process).")
@option("--chunk-size", type=int, help="Pairs per encoding job.")
@option("--force", is_flag=True, help="Replace OUT_DIR if it exists.")
def prepare(**options: Any) -> None:
    """Clean, encode and binarize a parallel corpus for `mtkit train`."""
    from mtkit.pipeline import prepare as pipeline
    from mtkit.pipeline.signals import Interrupted

    with user_errors():
        cfg = PrepareConfig(**options)
        try:
            manifest = pipeline.prepare(cfg)
        except Interrupted as stop:  # SIGINT/SIGTERM: the staging directory is gone
            click.echo(f"mtkit prepare: {stop}: {cfg.out_dir} was not written", err=True)
            sys.exit(128 + stop.signum)
        click.echo(pipeline.summary(manifest, cfg.out_dir))
