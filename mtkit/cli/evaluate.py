"""`mtkit evaluate`: BLEU, chrF, chrF++ and TER through sacrebleu, and paired significance tests."""

from __future__ import annotations

import click

from mtkit.cli.common import user_errors
from mtkit.config import EvaluateConfig, SearchConfig, TranslateConfig


@click.command()
@click.option(
    "-i",
    "--input",
    "input_",
    default="-",
    metavar="HYP",
    show_default=True,
    help="System output, one segment per line ('-': stdin).",
)
@click.option(
    "-r",
    "--ref",
    "refs",
    multiple=True,
    metavar="REF",
    help="Reference translation; repeat for several references.",
)
@click.option(
    "--metrics",
    default="bleu,chrf,ter",
    show_default=True,
    help="Comma-separated: bleu, chrf, chrf++, ter.",
)
@click.option(
    "--tokenize",
    "-tok",
    default="",
    metavar="TOK",
    help="BLEU tokenizer: 13a (default), intl, zh, char, none, flores200, ...",
)
@click.option("-lc", "--lowercase", is_flag=True, help="Case-insensitive BLEU and chrF.")
@click.option(
    "--compare",
    multiple=True,
    metavar="HYP2",
    help="Another system's output: paired test against HYP (the baseline); repeatable.",
)
@click.option(
    "--paired",
    type=click.Choice(["bs", "ar"]),
    default="bs",
    show_default=True,
    help="With --compare: paired bootstrap resampling or approximate randomization.",
)
@click.option(
    "--paired-bs-n",
    type=click.IntRange(1),
    default=1000,
    show_default=True,
    help="Bootstrap resamples (also the confidence intervals of 'ar').",
)
@click.option(
    "--paired-ar-n",
    type=click.IntRange(1),
    default=10000,
    show_default=True,
    help="Approximate randomization trials.",
)
@click.option(
    "--seed",
    type=click.IntRange(1),
    default=12345,
    show_default=True,
    help="Random seed of the paired tests (sacrebleu's default).",
)
@click.option(
    "-m",
    "--model",
    "checkpoints",
    multiple=True,
    metavar="CKPT",
    help="Translate --src with this checkpoint (repeat: ensemble), then score.",
)
@click.option("--src", default="", metavar="SRC", help="With -m: the source file.")
@click.option("-o", "--output", default="", metavar="FILE", help="With -m: save translations.")
@click.option("--beam", type=click.IntRange(1), default=5, show_default=True, help="With -m.")
@click.option("--device", default="auto", show_default=True, help="With -m: auto, cpu, cuda.")
@click.option(
    "-w",
    "--width",
    type=click.IntRange(0, 10),
    default=1,
    show_default=True,
    help="Decimals printed.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def evaluate(input_: str, refs: tuple[str, ...], metrics: str, tokenize: str, lowercase: bool,
             compare: tuple[str, ...], paired: str, paired_bs_n: int, paired_ar_n: int,
             seed: int, checkpoints: tuple[str, ...], src: str, output: str, beam: int,
             device: str, width: int, as_json: bool) -> None:  # fmt: skip
    """Score HYP (or the translation of --src by -m CKPT) against -r REF with sacrebleu.

    \b
    mtkit evaluate -i hyp.de -r ref.de
    mtkit evaluate -i base.de --compare new.de -r ref.de --metrics bleu,chrf++
    mtkit evaluate -m model.pt --src test.en -r test.de
    """
    from mtkit.pipeline.evaluate import evaluate as run_evaluate  # sacrebleu only when run

    config = EvaluateConfig(
        metrics=metrics.split(","), tokenize=tokenize, lowercase=lowercase, input=input_,
        refs=list(refs), compare=list(compare), paired=paired, paired_bs_n=paired_bs_n,
        paired_ar_n=paired_ar_n, seed=seed, checkpoints=list(checkpoints), src=src,
        output=output, width=width,
    )  # fmt: skip
    with user_errors():
        report = run_evaluate(config, TranslateConfig(SearchConfig(beam=beam), device=device))
    click.echo(report.to_json() if as_json else report.to_text())
