"""The `mtkit` command: a click group whose subcommands live in small modules, imported lazily.

Lazy loading keeps `mtkit --help` and `mtkit evaluate` free of a torch import.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import IO, Any

import click

from mtkit import __version__

# command name -> (module under mtkit.cli, attribute)
COMMANDS: dict[str, tuple[str, str]] = {
    "spm": ("spm", "spm"),
    "prepare": ("prepare", "prepare"),
    "train": ("train", "train"),
    "average": ("train", "average"),
    "translate": ("translate", "translate"),
    "distill": ("distill", "distill"),
    "evaluate": ("evaluate", "evaluate"),
    "plot": ("plot", "plot"),
    "export": ("export", "export"),
    "import": ("importing", "import_model"),
    "serve": ("serve", "serve"),
    "shortlist": ("shortlist", "shortlist"),
}


# `mtkit` alone prints the help through an exception (click >= 8.2): leave that one alone
_HELP_ERRORS = tuple(
    getattr(click.exceptions, name)
    for name in ("NoArgsIsHelpError",)
    if hasattr(click.exceptions, name)
)


class OneLineUsageError(click.UsageError):
    """A usage error (bad option value, missing argument, ...) shown on one line."""

    def show(self, file: IO[Any] | None = None) -> None:
        hint = f" (see '{self.ctx.command_path} --help')" if self.ctx is not None else ""
        click.echo(f"Error: {self.format_message()}{hint}", file=file, err=True)


@contextlib.contextmanager
def one_line_usage_errors() -> Iterator[None]:
    """Turn click's usage errors (usage text, hint, error: four lines) into one line."""
    try:
        yield
    except click.UsageError as err:
        if isinstance(err, (OneLineUsageError, *_HELP_ERRORS)):
            raise
        raise OneLineUsageError(err.format_message(), err.ctx) from None


class LazyGroup(click.Group):
    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with one_line_usage_errors():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with one_line_usage_errors():
            return super().invoke(ctx)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module_name, attr = COMMANDS[cmd_name]
        return getattr(importlib.import_module(f"mtkit.cli.{module_name}"), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mtkit")
def cli() -> None:
    """mtkit: train sentencepiece, prepare data, train Transformers, translate, evaluate."""
