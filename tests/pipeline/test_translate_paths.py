"""What `mtkit translate` checks before loading a model, and the summary it prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtkit.errors import MtkitError
from mtkit.pipeline.translate_paths import STDIO, TranslateStats, check_paths


def test_paths_are_checked_before_any_model(tmp_path: Path) -> None:
    check_paths(STDIO, STDIO)
    (tmp_path / "in.en").write_text("a\n")
    check_paths(str(tmp_path / "in.en"), str(tmp_path / "out.de"))
    for given, says in [
        ((str(tmp_path / "nope.en"), STDIO), "nope.en: no such input file"),
        ((str(tmp_path), STDIO), "is a directory, not a text file"),
        ((STDIO, str(tmp_path)), f"{tmp_path}: is a directory"),
    ]:
        with pytest.raises(MtkitError, match=says):
            check_paths(*given)


def test_the_summary_line() -> None:
    assert str(TranslateStats(3, 1.5)) == "translated 3 lines in 1.5s (2.0 lines/s)"
    assert str(TranslateStats(0, 0.0)) == "translated 0 lines in 0.0s (0.0 lines/s)"
