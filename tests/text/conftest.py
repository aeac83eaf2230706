"""The text layer's tests translate with the engine tests' tiny trained model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "engines"))
from engine_helpers import engine_config, trained_ckpt  # noqa: E402

from mtkit.engines import load_engine  # noqa: E402
from mtkit.engines.base import Engine  # noqa: E402


@pytest.fixture(scope="session")
def text_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The engine tests' tiny model, briefly trained on a word-substitution task."""
    return trained_ckpt(tmp_path_factory.mktemp("text"))


@pytest.fixture(scope="session")
def engine(text_ckpt: Path) -> Engine:
    return load_engine([str(text_ckpt)], engine_config("mtkit"))
