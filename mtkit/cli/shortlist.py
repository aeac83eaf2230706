"""`mtkit shortlist build --data DIR -o FILE`: a lexical shortlist for `translate --shortlist`."""

from __future__ import annotations

from functools import partial
from typing import Any

import click

from mtkit.cli.common import config_option, user_errors
from mtkit.config import ShortlistConfig

option = partial(config_option, config=ShortlistConfig)  # default and --help from the config


@click.group()
def shortlist() -> None:
    """Lexical shortlists: the target pieces each source piece may translate to."""


@shortlist.command("build")
@option("--data", required=True, type=click.Path(), help="Dataset directory (`mtkit prepare`).")
@option("-o", "--output", required=True, type=click.Path(), help="Shortlist file to write.")
@option(
    "--method",
    type=click.Choice(["ibm1", "dice"]),
    help="ibm1: IBM model 1's p(target|source); dice: Dice's co-occurrence coefficient.",
)
@option("--top-k", type=click.IntRange(1), help="Candidates kept per source piece.")
@option(
    "--frequent",
    type=click.IntRange(0),
    help="Most frequent target pieces, allowed in every batch.",
)
@option("--iterations", type=click.IntRange(1), help="EM iterations (ibm1).")
def build(**options: Any) -> None:
    """Learn from the training split of a dataset which target pieces each source piece
    translates to; keep the top-k per source piece plus the most frequent target pieces."""
    from mtkit.pipeline.shortlist import build_shortlist, summary

    with user_errors():
        cfg = ShortlistConfig(**options)
        found, seconds = build_shortlist(cfg)
        click.echo(summary(found, cfg.output, seconds))
