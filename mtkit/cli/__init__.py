"""The `mtkit` command: a click group whose subcommands live in small modules, imported lazily.

Lazy loading keeps `mtkit --help` and `mtkit evaluate` free of a torch import.
"""

from __future__ import annotations

import importlib

import click

from mtkit import __version__

# command name -> (module under mtkit.cli, attribute)
COMMANDS: dict[str, tuple[str, str]] = {
    "spm": ("spm", "spm"),
    "prepare": ("prepare", "prepare"),
    "train": ("train", "train"),
    "average": ("train", "average"),
    "translate": ("translate", "translate"),
    "evaluate": ("evaluate", "evaluate"),
    "plot": ("plot", "plot"),
    "export": ("export", "export"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if self._load(name) is not None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module_name, attr = COMMANDS[name]
        try:
            module = importlib.import_module(f"mtkit.cli.{module_name}")
        except ModuleNotFoundError as err:
            if err.name == f"mtkit.cli.{module_name}":
                return None  # command not part of this build
            raise
        return getattr(module, attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mtkit")
def cli() -> None:
    """mtkit: train sentencepiece, prepare data, train Transformers, translate, evaluate."""
