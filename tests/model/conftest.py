"""Fixtures of the model tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def compiled_dir(tmp_path_factory) -> Iterator[Path]:
    """A test module's cache of compiled steps (the libraries built once, shared by its tests)."""
    path = tmp_path_factory.mktemp("compiled")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MTKIT_COMPILED_DIR", str(path))
        yield path
