"""`mtkit plot RUN_DIR...`: a PNG of validation BLEU against wall-clock time."""

from __future__ import annotations

import click

from mtkit.cli.common import user_errors


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--output", default="curve.png", show_default=True, help="PNG to write.")
@click.option("--metric", default="valid_bleu", show_default=True,
              help="Metric of the JSONL log to plot (valid_bleu, valid_loss, ...).")  # fmt: skip
def plot(run_dirs: tuple[str, ...], output: str, metric: str) -> None:
    """Plot a metric from each run's metrics.jsonl against wall-clock hours."""
    from mtkit.pipeline.plot import plot_runs

    with user_errors():
        click.echo(plot_runs(list(run_dirs), output, metric))
