"""Every option's default is its config field's: in click's parameter and in --help."""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

import click
import pytest

from mtkit.cli import COMMANDS, cli
from mtkit.cli.common import CommaList, config_option
from mtkit.config import EvaluateConfig, PrepareConfig, ShortlistConfig, SpmConfig, TrainConfig
from mtkit.pipeline.plot import plot_runs

# command path -> (where its defaults live, options without a config field, all flags override)
CONFIGURED: dict[tuple[str, ...], tuple[Any, set[str], bool]] = {
    # --beam/--device: their own configs (SearchConfig, TranslateConfig), as the option says
    ("evaluate",): (EvaluateConfig, {"as_json"}, False),
    ("spm", "train"): (SpmConfig, {"model_prefix"}, False),  # required: no default
    ("prepare",): (PrepareConfig, set(), False),
    ("shortlist", "build"): (ShortlistConfig, {"data", "output"}, False),  # required
    # --augment: a spec (default, none, NAME=P,...) that sets the whole augment section
    ("train",): (TrainConfig, {"config_path", "sets", "quiet", "augment"}, True),  # None: not given
    ("plot",): (plot_runs, set(), False),  # no PlotConfig: plot_runs' keyword defaults
    # None: each option names its own config (SearchConfig or TranslateConfig)
    ("translate",): (None, {"models", "input_path", "output_path", "quiet", "warm"}, True),
    # DistillConfig's options, then a part of translate's
    ("distill",): (None, {"models", "input_path", "output_path", "quiet"}, True),
    # ServeConfig's options, then translate's (override: None unless given)
    ("serve",): (None, {"models"}, False),
}
# no config behind them: export (--quantization's default belongs to mtkit.export.ct2, too
# heavy to import for --help), import (like export: --format, --force), average
UNCONFIGURED = {("export",), ("import",), ("average",)}


def field_default(config: Any, name: str) -> Any:
    if dataclasses.is_dataclass(config):
        return {f.name: getattr(config(), f.name) for f in dataclasses.fields(config)}[name]
    return inspect.signature(config).parameters[name].default


def shown(param: click.Option, value: Any) -> str | None:
    """What --help should show for ``value``; None: nothing."""
    if param.is_flag and param.secondary_opts:
        return (param.opts if value else param.secondary_opts)[0][2:]  # --joint/--separate
    if param.is_flag:
        return None
    if value in ("", [], None):
        return None
    return ",".join(value) if isinstance(value, list) else str(value)


def mismatches(command: click.Command, config: Any, exempt: set[str], override: bool) -> list[str]:
    """Options whose default (value, or text in --help) is not their config field's."""
    ctx = click.Context(command)
    problems = []
    for param in command.params:
        if not isinstance(param, click.Option) or param.name in exempt | {"help"}:
            continue
        where = "/".join(param.opts)
        own = getattr(param, "config", None) or config  # the option's own config first
        try:
            expected = field_default(own, param.name)
        except (KeyError, TypeError):
            problems.append(f"{where}: no field {param.name} in {getattr(own, '__name__', own)}")
            continue
        value = param.type_cast_value(ctx, param.get_default(ctx))
        if value != (want := None if override or getattr(param, "override", False) else expected):
            problems.append(f"{where}: default {value!r}, not {want!r}")
        _, help_text = param.get_help_record(ctx)
        text = shown(param, expected)
        found = re.search(r"default: (.*?)[;\]]", help_text)
        if (found and found.group(1)) != text:
            problems.append(f"{where}: --help shows {found and found.group(1)!r}, not {text!r}")
    return problems


def command(path: tuple[str, ...]) -> click.Command:
    found: Any = cli
    for name in path:
        found = found.get_command(click.Context(found), name)
    return found


@pytest.mark.parametrize("path", list(CONFIGURED), ids=" ".join)
def test_defaults_are_the_config_fields(path: tuple[str, ...]) -> None:
    config, exempt, override = CONFIGURED[path]
    assert mismatches(command(path), config, exempt, override) == []


def test_every_command_is_checked() -> None:
    groups = {"spm": "train", "shortlist": "build"}  # groups of one subcommand each
    commands = {(name,) for name in COMMANDS if name not in groups} | set(groups.items())
    assert commands == set(CONFIGURED) | UNCONFIGURED
    for group, only in groups.items():
        assert command((group,)).list_commands(click.Context(cli)) == [only]


def test_a_hard_coded_default_is_caught() -> None:
    @click.command()
    @click.option("--paired-bs-n", type=int, default=999, show_default=True)
    @click.option("--seed", type=int, default=12345, show_default=True, help="[default: 1]")
    @config_option("--width", config=EvaluateConfig, type=int)
    @click.option("--metrics", default="bleu,chrf,ter", show_default=True)  # a str, not a list
    @click.option("--nope", type=int)
    def evaluate(**options: Any) -> None: ...

    assert mismatches(evaluate, EvaluateConfig, set(), override=False) == [
        "--paired-bs-n: default 999, not 1000",
        "--paired-bs-n: --help shows '999', not '1000'",
        "--seed: --help shows '1', not '12345'",
        "--metrics: default 'bleu,chrf,ter', not ['bleu', 'chrf', 'ter']",
        "--nope: no field nope in EvaluateConfig",
    ]
    assert mismatches(
        evaluate, EvaluateConfig, {"paired_bs_n", "seed", "metrics", "nope"}, override=True
    ) == ["--width: default 1, not None"]


def test_config_option() -> None:
    @click.command()
    @config_option("--metrics", config=EvaluateConfig, type=CommaList())
    @config_option("-r", "--ref", config=EvaluateConfig, field="refs", multiple=True)
    @config_option("--max-updates", config=TrainConfig, type=int, override=True, help="Stop.")
    @config_option("--joint/--separate", config=SpmConfig)
    def run(**options: Any) -> None: ...

    ctx = click.Context(run)
    assert [p.get_help_record(ctx)[1] for p in run.params] == [
        "[default: bleu,chrf,ter]",
        "",
        "Stop.  [default: 0]",
        "[default: joint]",
    ]
    defaults = {"metrics": ["bleu", "chrf", "ter"], "refs": [], "max_updates": None, "joint": True}
    assert run.make_context("run", []).params == defaults  # lists, not tuples: the fields' type
    ctx = run.make_context(
        "run", ["--metrics", "bleu,ter", "-r", "a", "-r", "b", "--separate", "--max-updates", "0"]
    )
    assert ctx.params == {
        "metrics": ["bleu", "ter"],
        "refs": ["a", "b"],
        "max_updates": 0,
        "joint": False,
    }


@pytest.mark.parametrize(
    "flags, attrs, error",
    [
        (
            ("--width",),
            {"default": 2},
            "width: the default comes from EvaluateConfig, not default=",
        ),
        (("--nope",), {}, "EvaluateConfig has no field 'nope'"),
        (("-x",), {}, "('-x',): give field= (no --long flag to name it after)"),
    ],
)
def test_config_option_refuses(flags: tuple[str, ...], attrs: dict[str, Any], error: str) -> None:
    with pytest.raises(TypeError, match=f"^{re.escape(error)}$"):
        config_option(*flags, config=EvaluateConfig, **attrs)(lambda: None)
