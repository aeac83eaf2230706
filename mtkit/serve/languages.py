"""The language pair a server translates: given on the command line, else what the engine's
model names (:meth:`mtkit.engines.base.Engine.languages`: a checkpoint's or an export's language
codes). The server reads no checkpoint and no dataset directory itself."""

from __future__ import annotations

from mtkit.engines.base import Engine
from mtkit.errors import MtkitError
from mtkit.languages import language_name

__all__ = ["language_name", "resolve_languages"]


def resolve_languages(given: tuple[str, str], engine: Engine, name: str) -> tuple[str, str]:
    """The pair given on the command line, else the one the engine's model names (``name``:
    the model, for the error when neither says)."""
    if all(given):
        return given
    found = engine.languages()
    if found is None:
        raise MtkitError(
            f"{name}: the model names no languages; give --source-lang and --target-lang"
        )
    return found.pair
