"""Fixtures of the model tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from shared_folders import built_once


def build_kernel(folder: Path) -> None:
    """The compiled step's C++ kernel, built into ``folder`` (~10 s) and loaded; nothing is
    built where this process has loaded it already, or where it cannot be built (the test
    that loads it says why)."""
    from mtkit.model import opaque

    opaque.serve_kernel(folder)


@pytest.fixture(scope="module")
def compiled_dir(tmp_path_factory) -> Iterator[Path]:
    """A test module's cache of compiled steps (the libraries built once, shared by its tests),
    holding the C++ kernel built once per test run."""
    path = tmp_path_factory.mktemp("compiled")
    kernels = built_once(tmp_path_factory, "linear-kernel", build_kernel)
    for library in kernels.glob("linear-kernel-*.so"):
        shutil.copyfile(library, path / library.name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MTKIT_COMPILED_DIR", str(path))
        yield path
