"""The engine registry: the one place that names engines, for the CLI, the config and serve."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import click
import pytest
from engine_helpers import engine_config

from mtkit.cli import cli
from mtkit.config import TranslateConfig
from mtkit.engines import ENGINES, engine_entry, engine_names, load_engine
from mtkit.engines.base import Engine
from mtkit.errors import MtkitError


def test_the_cli_offers_the_registered_engines() -> None:
    context = click.Context(cli)
    offered = []
    for name in cli.list_commands(context):
        params = {p.name: p for p in cli.get_command(context, name).params}
        if "engine" in params:
            offered.append(name)
            assert isinstance(params["engine"].type, click.Choice)
            assert tuple(params["engine"].type.choices) == engine_names()
    assert {"translate", "serve"} <= set(offered)
    assert engine_names() == ("mtkit", "ctranslate2")


@pytest.mark.parametrize("name", list(ENGINES))
def test_every_registered_engine_has_a_loader(name: str) -> None:
    module = importlib.import_module(ENGINES[name].module)
    assert callable(module.load)
    if ENGINES[name].worker_processes:
        assert callable(module.describe)


def test_an_unknown_engine_is_one_line_naming_the_known_ones(engine_ckpt) -> None:
    config = TranslateConfig(engine="marian")  # the registry checks names, when loading
    with pytest.raises(MtkitError, match=r"^--engine: unknown engine 'marian' \(mtkit or "):
        load_engine([str(engine_ckpt)], config)
    with pytest.raises(MtkitError, match="unknown engine"):
        engine_entry("")


@pytest.mark.parametrize("name", list(ENGINES))
def test_no_model_names_what_the_engine_reads(name: str) -> None:
    with pytest.raises(
        MtkitError, match=f"no model given .*{re.escape(ENGINES[name].model_format)}"
    ):
        load_engine([], TranslateConfig(engine=name))


def test_workers_wrap_only_engines_without_their_own(load_kind) -> None:
    from mtkit.engines.ct2 import Ct2Engine
    from mtkit.engines.native import NativeEngine
    from mtkit.engines.parallel import ParallelEngine

    assert isinstance(load_kind("mtkit"), NativeEngine)
    assert isinstance(load_kind("mtkit-2-workers"), ParallelEngine)
    assert isinstance(load_kind("ctranslate2-2-workers"), Ct2Engine)  # inter_threads


def test_workers_build_no_model_in_the_main_process(engine_ckpt, monkeypatch) -> None:
    """The main process only encodes: the model is built in the workers alone."""
    from mtkit.engines import native

    def refuse(*args: object, **kwargs: object) -> Engine:
        raise AssertionError("the main process loaded the model")

    monkeypatch.setattr(native, "load", refuse)
    engine = load_engine([str(engine_ckpt)], engine_config("mtkit-2-workers"))
    assert engine.translate(["a dog"])[0]


def test_the_ctranslate2_engine_runs_without_torch() -> None:
    """Its module, the directory format and the precision policy import neither torch nor the
    model (checked in a fresh interpreter: this one has torch loaded already)."""
    code = (
        "import sys, mtkit.engines.ct2; print(sorted(m for m in ('torch', 'mtkit.model') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
