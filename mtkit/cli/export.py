"""`mtkit export -m CKPT --format hf|ctranslate2 OUT_DIR`: the model for another engine."""

from __future__ import annotations

import click

from mtkit.cli.common import user_errors

FORMATS = ("hf", "ctranslate2")
QUANTIZATIONS = ("float32", "int8_float32", "int8", "float16")  # == mtkit.export.ct2.QUANTIZATIONS


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
    type=click.Choice(FORMATS),
    required=True,
    help="hf: a transformers MarianMTModel directory; ctranslate2: a CTranslate2 model.",
)
@click.option(
    "--quantization",
    type=click.Choice(QUANTIZATIONS),
    default="float32",
    show_default=True,
    help="Weight type of a ctranslate2 export.",
)
@click.option("--force", is_flag=True, help="Replace OUT_DIR if it exists.")
def export(out_dir: str, checkpoint: str, fmt: str, quantization: str, force: bool) -> None:
    """Export a checkpoint to OUT_DIR for Hugging Face transformers or CTranslate2.

    hf needs `pip install 'mtkit[hf]'`, ctranslate2 needs `pip install 'mtkit[ct2]'`.
    """
    with user_errors():
        if fmt == "hf":
            from mtkit.export.hf import export_hf

            if quantization != "float32":
                raise click.UsageError("--quantization applies to --format ctranslate2 only")
            result = export_hf(checkpoint, out_dir, force=force)
            diff = result.max_logit_difference
            click.echo(
                f"{result.out_dir}: MarianMTModel + MarianTokenizer "
                f"(max |logit diff| vs mtkit {diff:.1e})"
            )
        else:
            from mtkit.export.ct2 import export_ct2

            path = export_ct2(checkpoint, out_dir, quantization=quantization, force=force)
            click.echo(f"{path}: CTranslate2 model ({quantization}) + source.spm/target.spm")
