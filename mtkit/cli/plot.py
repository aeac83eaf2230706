"""`mtkit plot RUN_DIR...`: a PNG of validation BLEU against wall-clock time."""

from __future__ import annotations

from functools import partial

import click

from mtkit.cli.common import config_option, user_errors
from mtkit.pipeline.plot import plot_runs

option = partial(config_option, config=plot_runs)  # no PlotConfig: plot_runs' defaults


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path())
@option("-o", "--output", help="PNG to write.")
@option("--metric", help="Metric of the JSONL log to plot (valid_bleu, valid_loss, ...).")
def plot(run_dirs: tuple[str, ...], output: str, metric: str) -> None:
    """Plot a metric from each run's metrics.jsonl against wall-clock hours."""
    with user_errors():
        click.echo(plot_runs(list(run_dirs), output, metric))
