"""Fixtures for the training tests: one CPU thread, and a CLI runner."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner, Result

from mtkit.cli import cli


@pytest.fixture(autouse=True)
def one_thread() -> object:
    """One intra-op thread: tiny models gain nothing from more, and CI cores are shared."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def mtkit() -> object:
    """``mtkit(*args) -> click Result`` running the CLI in this process."""
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(cli, list(args), catch_exceptions=True)

    return invoke
