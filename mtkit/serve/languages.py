"""The language pair a server translates: given on the command line, else read from the model.

mtkit checkpoints hold no language codes of their own yet. A checkpoint's pair is read from,
in order: ``src_lang``/``tgt_lang`` at its top level or in its ``train_config`` (where a later
``mtkit train`` may store them), else the ``manifest.json`` of the dataset it was trained on
(``train_config.data``, written by ``mtkit prepare``) when that directory is still there. A
CTranslate2 export is read through the ``checkpoint`` named in its ``mtkit.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mtkit.checkpoint import load_checkpoint
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


def _pair(mapping: Any) -> tuple[str, str] | None:
    if isinstance(mapping, dict):
        src, tgt = mapping.get("src_lang"), mapping.get("tgt_lang")
        if isinstance(src, str) and isinstance(tgt, str) and src and tgt:
            return src, tgt
    return None


def checkpoint_languages(ckpt: dict[str, Any]) -> tuple[str, str] | None:
    """(source, target) codes that a loaded checkpoint names, or None (see the module doc)."""
    train_config = ckpt.get("train_config")
    found = _pair(ckpt) or _pair(train_config)
    if found is None and isinstance(train_config, dict) and train_config.get("data"):
        manifest = Path(str(train_config["data"])) / "manifest.json"
        try:
            found = _pair(json.loads(manifest.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            found = None
    return found


def model_languages(models: list[str], engine: str) -> tuple[str, str] | None:
    """The pair the first model names, or None; ``engine``: mtkit or ctranslate2."""
    path = Path(models[0])
    if engine == "ctranslate2":
        try:
            meta = json.loads((path / "mtkit.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        found = _pair(meta)
        if found is None and Path(str(meta.get("checkpoint", ""))).is_file():
            return checkpoint_languages(load_checkpoint(meta["checkpoint"]))
        return found
    return checkpoint_languages(load_checkpoint(path))


def resolve_languages(given: tuple[str, str], models: list[str], engine: str) -> tuple[str, str]:
    """The pair given on the command line, else the model's; an error if neither says."""
    if all(given):
        return given
    found = model_languages(models, engine)
    if found is None:
        raise MtkitError(
            f"{models[0]}: the model names no languages; give --source-lang and --target-lang"
        )
    return found
