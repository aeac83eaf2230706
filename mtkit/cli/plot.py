"""`mtkit plot RUN_DIR...`: a PNG of validation BLEU against wall-clock time (or updates)."""

from __future__ import annotations

from functools import partial

import click

from mtkit.cli.common import config_option, user_errors
from mtkit.pipeline.plot import X_AXES, plot_runs

option = partial(config_option, config=plot_runs)  # no PlotConfig: plot_runs' defaults


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path())
@option("-o", "--output", help="PNG to write.")
@option("--metric", help="Metric of the JSONL log to plot (valid_bleu, valid_loss, ...).")
@option(
    "--x",
    type=click.Choice(list(X_AXES)),
    help="What the x axis counts: wall-clock hours, or updates (which load does not stretch).",
)
def plot(run_dirs: tuple[str, ...], output: str, metric: str, x: str) -> None:
    """Plot a metric from each run's metrics.jsonl against wall-clock hours (or updates)."""
    with user_errors():
        click.echo(plot_runs(list(run_dirs), output, metric, x))
