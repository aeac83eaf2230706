"""`mtkit train` (also under torchrun) and `mtkit average`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from mtkit.cli.common import config_option, user_errors
from mtkit.config import MODEL_PRESETS, TrainConfig, augment_spec

# (flags, TrainConfig field, type, help); every default comes from TrainConfig (or the YAML)
TRAIN_OPTIONS: list[tuple[tuple[str, ...], str, Any, str]] = [
    (("--data",), "data", str, "Binarized dataset directory (mtkit prepare)."),
    (("--run-dir",), "run_dir", str, "Checkpoints, logs and config; an existing run resumes."),
    (("--preset",), "preset", str, f"Model preset: {', '.join(MODEL_PRESETS)}."),
    (
        ("--init-from",),
        "init_from",
        str,
        "Start a new run from this checkpoint's model and "
        "weights (fine-tuning; fresh optimizer and schedule).",
    ),
    (("--max-updates",), "max_updates", int, "Stop after this many updates (0: no limit)."),
    (("--max-epochs",), "max_epochs", int, "Stop after this many epochs (0: no limit)."),
    (("--max-time",), "max_time", float, "Wall-clock budget in seconds (0: no limit)."),
    (
        ("--max-tokens",),
        "max_tokens",
        int,
        "Per batch and process: pairs x (max(source, target) "
        "+ 1) of its longest pair, padding counted.",
    ),
    (("--update-freq",), "update_freq", int, "Batches accumulated per update."),
    (("--lr",), "lr", float, "Peak learning rate."),
    (("--warmup-updates",), "warmup_updates", int, "Linear warmup, then inverse sqrt decay."),
    (("--seed",), "seed", int, "Seed for initialisation, dropout and batch order."),
    (("--device",), "device", str, "auto, cpu, cuda or cuda:N."),
    (
        ("--precision",),
        "precision",
        click.Choice(["auto", "fp32", "bf16", "fp16"]),
        "Autocast dtype. CUDA auto: bf16 if supported, else fp16. CPU auto: bf16 where the CPU "
        "has bf16 hardware and the ablation found no loss (mtkit/cpu.py), else fp32; fp16: CUDA.",
    ),
    (
        ("--compile",),
        "compile",
        click.Choice(["off", "on", "auto"]),
        "Forward, loss and backward as one torch.compile graph for every batch shape (the "
        "first update compiles; later runs reuse the cache). auto: on CUDA; off on CPU, where "
        "it measured no faster.",
    ),
    (("--validate-every",), "validate_every", int, "Validate every N updates (0: never)."),
    (("--save-every",), "save_every", int, "Numbered checkpoint every N updates (0: none)."),
    (("--keep-last",), "keep_last", int, "Numbered checkpoints kept (0: all)."),
    (("--patience",), "patience", int, "Stop after N validations without gain (0: never)."),
    (("--label-smoothing",), "label_smoothing", float, "Epsilon of the smoothed loss."),
]


def train_options(func: Callable) -> Callable:
    """One click option per TRAIN_OPTIONS row: None unless given, TrainConfig's default shown."""
    for flags, name, kind, help_text in reversed(TRAIN_OPTIONS):
        option = config_option(
            *flags, config=TrainConfig, field=name, type=kind, help=help_text, override=True
        )
        func = option(func)
    return func


@click.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="YAML: TrainConfig fields, plus a 'model:' mapping of model fields.",
)
@train_options
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Any TrainConfig field, or model.FIELD for the model (repeatable).",
)
@click.option(
    "--augment",
    metavar="SPEC",
    help="Training-time augmentation: default (lowercase 0.1, typos and merge 0.05, noise "
    "0.005), none, or NAME=P,... (those named; the rest 0). See docs/train.md.",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or log lines on stderr.")
@click.pass_context
def train(
    ctx: click.Context,
    config_path: str | None,
    sets: tuple[str, ...],
    quiet: bool,
    augment: str | None,
    **options: Any,
) -> None:
    """Train a Transformer, or continue the run in --run-dir.

    Settings: TrainConfig defaults (or the run's saved config when resuming) < --config YAML <
    flags and --set. Several GPUs or nodes: torchrun --nproc_per_node N -m mtkit train ...
    """
    from mtkit.pipeline.train import run_training

    given = {key: value for key, value in options.items() if value is not None}
    with user_errors():
        if augment is not None:
            given["augment"] = augment_spec(augment)
        summary, code = run_training(config_path, given, sets, quiet)
    if summary:
        click.echo(summary)
    ctx.exit(code)


@click.command()
@click.argument("run_dir", required=False, type=click.Path())
@click.option("--last", type=int, help="Average the last N numbered checkpoints of RUN_DIR.")
@click.option(
    "-c",
    "--checkpoint",
    "checkpoints",
    multiple=True,
    type=click.Path(),
    help="A checkpoint to average (repeatable), instead of --last.",
)
@click.option("-o", "--output", required=True, type=click.Path(), help="Checkpoint to write.")
def average(
    run_dir: str | None, last: int | None, checkpoints: tuple[str, ...], output: str
) -> None:
    """Average model parameters of checkpoints into a new (inference) checkpoint."""
    from mtkit.pipeline.average import run_average

    with user_errors():
        click.echo(run_average(run_dir, last, checkpoints, output))
