"""`mtkit prepare`: a parallel corpus -> cleaned, encoded, binarized dataset directory."""

from __future__ import annotations

import sys

import click

from mtkit.cli.common import user_errors
from mtkit.config import PrepareConfig

_D = PrepareConfig()
_SOURCE_HELP = ("PREFIX (reads PREFIX.SRC and PREFIX.TGT), FILE.tsv, FILE.parquet/.json/.jsonl "
                "(translation schema), a saved dataset directory, or hf:NAME[:SPLIT].")  # fmt: skip


@click.command()
@click.option("--src-lang", default=_D.src_lang, show_default=True)
@click.option("--tgt-lang", default=_D.tgt_lang, show_default=True)
@click.option(
    "--train",
    "--train-prefix",
    "train",
    default="",
    metavar="SOURCE",
    help=f"Train corpus: {_SOURCE_HELP}",
)
@click.option(
    "--valid",
    "--valid-prefix",
    "valid",
    default="",
    metavar="SOURCE",
    help="Validation corpus (same forms).",
)
@click.option(
    "--test",
    "--test-prefix",
    "test",
    default="",
    metavar="SOURCE",
    help="Test corpus (same forms).",
)
@click.option(
    "--spm",
    "--src-spm",
    "src_spm",
    default="",
    help="Sentencepiece model (joint), or the --model-prefix of `mtkit spm train`.",
)
@click.option("--tgt-spm", default="", help="Target model, for separate vocabularies.")
@click.option("-o", "--out-dir", default=_D.out_dir, show_default=True)
@click.option(
    "--format",
    "format_",
    default=_D.format,
    show_default=True,
    type=click.Choice(["auto", "text", "tsv", "hf"]),
    help="How to read the sources.",
)
@click.option("--hf-config", default="", help="HF dataset configuration, e.g. de-en.")
@click.option(
    "--max-tokens",
    default=_D.max_tokens,
    show_default=True,
    type=int,
    help="Train: drop pairs with more pieces on either side (0: off).",
)
@click.option(
    "--max-ratio",
    default=_D.max_ratio,
    show_default=True,
    type=float,
    help="Train: drop pairs whose length ratio is above this (0: off).",
)
@click.option(
    "--dedup/--no-dedup",
    default=_D.dedup,
    show_default=True,
    help="Train: drop exact duplicate pairs.",
)
@click.option(
    "--workers",
    default=_D.workers,
    show_default=True,
    type=int,
    help="Encoding processes (0: encode in the main process).",
)
@click.option(
    "--chunk-size",
    default=_D.chunk_size,
    show_default=True,
    type=int,
    help="Pairs per encoding job.",
)
@click.option("--force", is_flag=True, help="Replace OUT_DIR if it exists.")
def prepare(format_: str, **options: object) -> None:
    """Clean, encode and binarize a parallel corpus for `mtkit train`."""
    from mtkit.pipeline import prepare as pipeline
    from mtkit.pipeline.signals import Interrupted

    with user_errors():
        cfg = PrepareConfig(format=format_, **options)  # type: ignore[arg-type]
        try:
            manifest = pipeline.prepare(cfg)
        except Interrupted as stop:  # SIGINT/SIGTERM: the staging directory is gone
            click.echo(f"mtkit prepare: {stop}: {cfg.out_dir} was not written", err=True)
            sys.exit(128 + stop.signum)
        click.echo(pipeline.summary(manifest, cfg.out_dir))
