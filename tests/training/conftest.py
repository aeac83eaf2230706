"""Fixtures for the training tests: one CPU thread, and a CLI runner."""

from __future__ import annotations

import pytest
from click.testing import CliRunner, Result

from mtkit.cli import cli


@pytest.fixture(autouse=True)
def _one_thread(one_thread: None) -> None:
    """Every test here runs on one torch thread (tests/conftest.py)."""


@pytest.fixture
def mtkit() -> object:
    """``mtkit(*args) -> click Result`` running the CLI in this process."""
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(cli, list(args), catch_exceptions=True)

    return invoke
