"""The language pair a server translates: given on the command line, else what the engine's
model names (:meth:`mtkit.engines.base.Engine.languages`: a checkpoint's or an export's language
codes). The server reads no checkpoint and no dataset directory itself."""

from __future__ import annotations

from mtkit.engines.base import Engine
from mtkit.errors import MtkitError

# LibreTranslate's /languages gives names; these are the common ones, others show their code
NAMES = {
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "et": "Estonian", "fi": "Finnish", "fr": "French",
    "hi": "Hindi", "hu": "Hungarian", "it": "Italian", "ja": "Japanese", "ko": "Korean",
    "lt": "Lithuanian", "lv": "Latvian", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese",
    "ro": "Romanian", "ru": "Russian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian",
    "zh": "Chinese",
}  # fmt: skip


def language_name(code: str) -> str:
    return NAMES.get(code, code)


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
