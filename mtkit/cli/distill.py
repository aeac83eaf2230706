"""`mtkit distill -m TEACHER -i train.src -o train.distilled.tgt`: a teacher's translations of a
corpus for sequence-level distillation, in parts that survive an interruption."""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

import click

from mtkit.cli.common import config_option, user_errors
from mtkit.cli.translate import SEARCH_OPTIONS, search_options
from mtkit.config import DistillConfig

option = partial(config_option, config=DistillConfig, override=True)
# translate's options that make sense for a corpus translated into one line per line
KEPT = {
    "beam",
    "lenpen",
    "lenpen_style",
    "max_len_a",
    "max_len_b",
    "min_len",
    "no_repeat_ngram",
    "unk_penalty",
    "max_tokens",
    "max_input_tokens",
    "device",
    "dtype",
    "quantize",
    "cpu_matmul",
    "threads",
    "workers",
    "tgt_lang",
    "engine",
}
ROWS = [row for row in SEARCH_OPTIONS if row[1] in KEPT]


@click.command()
@click.option(
    "-m",
    "--model",
    "models",
    multiple=True,
    required=True,
    type=click.Path(),
    help="Teacher checkpoint; repeat for an ensemble (same spm models).",
)
@click.option(
    "-i",
    "--input",
    "input_path",
    required=True,
    type=click.Path(),
    help="The corpus's source side, one sentence per line (a file: read again when resumed).",
)
@click.option(
    "-o",
    "--output",
    "output_path",
    required=True,
    type=click.Path(),
    help="The distilled target side: one translation per input line.",
)
@option(
    "--part-lines",
    type=click.IntRange(1),
    help="Lines per part; a finished part is kept when the run stops.",
)
@option("--parts-dir", help="Where the parts wait for the output (default: OUTPUT.parts).")
@option("--keep-parts", is_flag=True, help="Keep the parts once the output is written.")
@partial(search_options, rows=ROWS)
@click.option("-q", "--quiet", is_flag=True, help="No line per part and no summary on stderr.")
def distill(
    models: tuple[str, ...], input_path: str, output_path: str, quiet: bool, **options: Any
) -> None:
    """Translate a corpus's source side with a teacher (or an ensemble), beam 5 by default, for
    sequence-level knowledge distillation (Kim & Rush 2016). The corpus is translated in parts
    of --part-lines lines, each written whole: stopped, the same command goes on from the
    parts done; the output appears when every part is there, equal to an uninterrupted run's."""
    from mtkit.pipeline.distill import distill_corpus
    from mtkit.pipeline.signals import Interrupted

    with user_errors():
        given = {key: value for key, value in options.items() if value is not None}
        config = DistillConfig.from_flat(given, where="mtkit distill")
        report = None if quiet else partial(click.echo, err=True)
        try:
            stats = distill_corpus(list(models), input_path, output_path, config, report)
        except Interrupted as stop:
            click.echo(
                f"mtkit distill: {stop}: the parts of the first {stop.lines} lines are "
                "kept; run the same command again to go on",
                err=True,
            )
            sys.exit(128 + stop.signum)
        if not quiet:
            click.echo(f"mtkit distill: {stats}", err=True)
