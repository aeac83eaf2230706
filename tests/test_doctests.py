"""Every ``>>>`` example in mtkit's docstrings runs and gives what it shows (one test per
module that has examples, found by reading the sources: a new example is tested at once)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import mtkit

PACKAGE = Path(mtkit.__file__).parent
WITH_EXAMPLES = sorted(
    ".".join(("mtkit", *p.relative_to(PACKAGE).with_suffix("").parts))
    for p in PACKAGE.rglob("*.py")
    if ">>> " in p.read_text(encoding="utf-8")
)


def test_examples_are_found() -> None:
    assert "mtkit.decoding.beam" in WITH_EXAMPLES and "mtkit.model.attention" in WITH_EXAMPLES


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(module, optionflags=flags, verbose=False)
    assert result.failed == 0
    assert result.attempted > 0, f"{name}: no example found by doctest"
