"""`mtkit spm train`: sentencepiece BPE models with mtkit's fixed special ids."""

from __future__ import annotations

import click

from mtkit.cli.common import user_errors
from mtkit.config import SpmConfig

_D = SpmConfig()


@click.group()
def spm() -> None:
    """Sentencepiece models (BPE, special ids pad=0 unk=1 bos=2 eos=3)."""


@spm.command("train")
@click.argument("inputs", nargs=-1, metavar="[FILES]...")
@click.option("--model-prefix", required=True, help="Writes PREFIX.model and PREFIX.vocab.")
@click.option("--vocab-size", default=_D.vocab_size, show_default=True, type=int)
@click.option(
    "--character-coverage",
    default=_D.character_coverage,
    show_default=True,
    type=float,
    help="Share of characters covered (lower for CJK-size alphabets).",
)
@click.option(
    "--input-sentence-size",
    default=_D.input_sentence_size,
    show_default=True,
    type=int,
    help="Sample this many sentences for training (0: all).",
)
@click.option("--seed", default=_D.seed, show_default=True, type=int)
@click.option("--threads", "num_threads", default=_D.num_threads, show_default=True, type=int)
@click.option(
    "--train",
    "--train-prefix",
    "train",
    default="",
    metavar="SOURCE",
    help="Instead of FILES: a corpus as `mtkit prepare` reads it (PREFIX, FILE.tsv, "
    "FILE.parquet/.jsonl, a saved dataset dir, hf:NAME).",
)
@click.option("--src-lang", default="", help="Source language (with --train).")
@click.option("--tgt-lang", default="", help="Target language (with --train).")
@click.option(
    "--joint/--separate",
    default=True,
    show_default=True,
    help="With --train: one model PREFIX.model, or PREFIX.SRC.model + PREFIX.TGT.model.",
)
@click.option(
    "--format",
    "format_",
    default=_D.format,
    show_default=True,
    type=click.Choice(["auto", "text", "tsv", "hf"]),
    help="How to read --train.",
)
@click.option("--hf-config", default="", help="HF dataset configuration, e.g. de-en.")
def train(inputs: tuple[str, ...], format_: str, **options: object) -> None:
    """Train a BPE model on text FILES, or on both sides (or each side) of a corpus."""
    from mtkit.pipeline.spm import summary, train_models

    with user_errors():
        cfg = SpmConfig(inputs=list(inputs), format=format_, **options)  # type: ignore[arg-type]
        click.echo(summary(train_models(cfg)))
