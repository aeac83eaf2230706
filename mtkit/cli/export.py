"""`mtkit export -m CKPT --format hf|ctranslate2|argos OUT_DIR`: the model for another engine."""

from __future__ import annotations

import click

from mtkit.cli.common import user_errors
from mtkit.pipeline.export import EXPORT_FORMATS, QUANTIZATIONS, export_model


@click.command()
@click.argument("out_dir", type=click.Path())
@click.option(
    "-m",
    "--model",
    "checkpoint",
    required=True,
    type=click.Path(),
    help="mtkit checkpoint (.pt) to export.",
)
@click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(list(EXPORT_FORMATS)),
    required=True,
    help="; ".join(f"{name}: {what}" for name, what in EXPORT_FORMATS.items()) + ".",
)
@click.option(
    "--quantization",
    type=click.Choice(QUANTIZATIONS),
    default="float32",
    show_default=True,
    help="Weight type of a ctranslate2 or argos export.",
)
@click.option(
    "--shortlist",
    default="",
    type=click.Path(),
    help="Lexical shortlist (`mtkit shortlist build`) written as CTranslate2's vocabulary map "
    "(vmap.txt), which `--engine ctranslate2` then decodes with.",
)
@click.option("--force", is_flag=True, help="Replace OUT_DIR if it exists.")
@click.option(
    "--source-lang",
    help="argos: the package's source language code [default: the checkpoint's].",
)
@click.option(
    "--target-lang",
    help="argos: the package's target language code [default: the checkpoint's]; for a "
    "multilingual model, the one target language the package translates into.",
)
@click.option("--package-version", help="argos: the package's version [default: 1.0].")
def export(
    out_dir: str,
    checkpoint: str,
    fmt: str,
    quantization: str,
    shortlist: str,
    force: bool,
    source_lang: str | None,
    target_lang: str | None,
    package_version: str | None,
) -> None:
    """Export a checkpoint to OUT_DIR for Hugging Face transformers, CTranslate2, or Argos
    Translate and LibreTranslate (OUT_DIR is then a .argosmodel file)."""
    if fmt == "hf" and quantization != "float32":
        raise click.UsageError("--quantization applies to --format ctranslate2 and argos only")
    with user_errors():
        click.echo(
            export_model(
                checkpoint,
                out_dir,
                fmt,
                quantization,
                force,
                source_lang,
                target_lang,
                package_version,
                shortlist,
            )
        )
