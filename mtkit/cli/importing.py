"""`mtkit import --format hf DIR -o model.pt`: a Hugging Face Marian (OPUS-MT) model, imported."""

from __future__ import annotations

import click

from mtkit.cli.common import user_errors
from mtkit.pipeline import export as pipeline


@click.command("import")
@click.argument("model_dir", type=click.Path())
@click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(list(pipeline.IMPORT_FORMATS)),
    default="hf",
    show_default=True,
    help="; ".join(f"{name}: {what}" for name, what in pipeline.IMPORT_FORMATS.items()) + ".",
)
@click.option("-o", "--output", required=True, type=click.Path(), help="Checkpoint to write.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@click.option(
    "--source-lang",
    help="The model's source language code(s), comma-separated "
    "[default: source_lang of its tokenizer_config.json].",
)
@click.option(
    "--target-lang",
    help="The model's target language code(s), comma-separated "
    "[default: target_lang of its tokenizer_config.json].",
)
def import_model(
    model_dir: str,
    fmt: str,
    output: str,
    force: bool,
    source_lang: str | None,
    target_lang: str | None,
) -> None:
    """Import MODEL_DIR as an mtkit checkpoint (translate, evaluate, fine-tune, export it).

    The checkpoint keeps the model's own vocabulary (vocab.json's ids) and special ids; anything
    mtkit cannot represent exactly is refused, naming it, and nothing is written. It names its
    languages when both sides are known (given, or in tokenizer_config.json).
    """
    with user_errors():
        click.echo(pipeline.import_model(model_dir, output, fmt, force, source_lang, target_lang))
