"""`mtkit evaluate`: BLEU, chrF, chrF++ and TER through sacrebleu, and paired significance tests."""

from __future__ import annotations

from functools import partial
from typing import Any

import click

from mtkit.cli.common import CommaList, config_option, user_errors
from mtkit.config import DTYPES, EvaluateConfig, SearchConfig, TranslateConfig

option = partial(config_option, config=EvaluateConfig)  # default and --help from EvaluateConfig


@click.command()
@option("-i", "--input", metavar="HYP", help="System output, one segment per line ('-': stdin).")
@option(
    "-r",
    "--ref",
    field="refs",
    multiple=True,
    metavar="REF",
    help="Reference translation; repeat for several references.",
)
@option("--metrics", type=CommaList(), help="Comma-separated: bleu, chrf, chrf++, ter.")
@option(
    "--tokenize",
    "-tok",
    metavar="TOK",
    help="BLEU tokenizer: 13a (default), intl, zh, char, none, flores200, ...",
)
@option("-lc", "--lowercase", is_flag=True, help="Case-insensitive BLEU and chrF.")
@option(
    "--compare",
    multiple=True,
    metavar="HYP2",
    help="Another system's output: paired test against HYP (the baseline); repeatable.",
)
@option(
    "--paired",
    type=click.Choice(["bs", "ar"]),
    help="With --compare: paired bootstrap resampling or approximate randomization.",
)
@option(
    "--paired-bs-n",
    type=click.IntRange(1),
    help="Bootstrap resamples (also the confidence intervals of 'ar').",
)
@option("--paired-ar-n", type=click.IntRange(1), help="Approximate randomization trials.")
@option(
    "--seed", type=click.IntRange(1), help="Random seed of the paired tests (sacrebleu's default)."
)
@option(
    "-m",
    "--model",
    field="checkpoints",
    multiple=True,
    metavar="CKPT",
    help="Translate --src with this checkpoint (repeat: ensemble), then score.",
)
@option("--src", metavar="SRC", help="With -m: the source file.")
@option("-o", "--output", metavar="FILE", help="With -m: save translations.")
@config_option("--beam", config=SearchConfig, type=click.IntRange(1), help="With -m.")
@config_option("--device", config=TranslateConfig, help="With -m: auto, cpu, cuda or cuda:N.")
@config_option(
    "--dtype",
    config=TranslateConfig,
    type=click.Choice(DTYPES),
    help="With -m: precision, as for mtkit translate.",
)
@config_option(
    "--tgt-lang",
    config=TranslateConfig,
    help="With -m and a multilingual model: the target language.",
)
@option("-w", "--width", type=click.IntRange(0, 10), help="Decimals printed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def evaluate(
    beam: int, device: str, dtype: str, tgt_lang: str, as_json: bool, **options: Any
) -> None:
    """Score HYP (or the translation of --src by -m CKPT) against -r REF with sacrebleu.

    \b
    mtkit evaluate -i hyp.de -r ref.de
    mtkit evaluate -i base.de --compare new.de -r ref.de --metrics bleu,chrf++
    mtkit evaluate -m model.pt --src test.en -r test.de
    """
    from mtkit.pipeline.evaluate import evaluate as run_evaluate  # sacrebleu only when run

    with user_errors():
        report = run_evaluate(
            EvaluateConfig(**options),
            TranslateConfig(SearchConfig(beam=beam), device=device, dtype=dtype, tgt_lang=tgt_lang),
        )
    click.echo(report.to_json() if as_json else report.to_text())
