"""What a model translates: its source and target language codes.

A bilingual model has one code a side; a multilingual one (``>>xx<<`` target tags,
:mod:`mtkit.data.tags`) several. Datasets (``manifest.json``), checkpoints and exported
directories write them the same way, each side's codes comma-separated::

    {"src_lang": "en", "tgt_lang": "de,fr"}

>>> Languages.from_dict({"src_lang": "en", "tgt_lang": "de,fr"})
Languages(sources=('en',), targets=('de', 'fr'))
>>> Languages(("en",), ("de", "fr")).to_dict()
{'src_lang': 'en', 'tgt_lang': 'de,fr'}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Names of the common codes, for what shows them (LibreTranslate's /languages, an Argos package's
# metadata); other codes show as themselves
NAMES = {
    "ar": "Arabic",
    "cs": "Czech",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "en": "English",
    "es": "Spanish",
    "et": "Estonian",
    "fi": "Finnish",
    "fr": "French",
    "hi": "Hindi",
    "hu": "Hungarian",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "lt": "Lithuanian",
    "lv": "Latvian",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "sv": "Swedish",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "zh": "Chinese",
}


def language_name(code: str) -> str:
    return NAMES.get(code, code)


@dataclass(frozen=True)
class Languages:
    """Source and target language codes, in the order the model lists them."""

    sources: tuple[str, ...]
    targets: tuple[str, ...]

    @property
    def pair(self) -> tuple[str, str]:
        """(source, target), each side's codes comma-separated."""
        return ",".join(self.sources), ",".join(self.targets)

    def to_dict(self) -> dict[str, str]:
        src, tgt = self.pair
        return {"src_lang": src, "tgt_lang": tgt}

    @classmethod
    def from_dict(cls, mapping: Any) -> Languages | None:
        """The codes under ``src_lang``/``tgt_lang``; None unless both sides name some."""
        if not isinstance(mapping, dict):
            return None
        src, tgt = mapping.get("src_lang"), mapping.get("tgt_lang")
        if not (isinstance(src, str) and isinstance(tgt, str)):
            return None
        sources, targets = _codes(src), _codes(tgt)
        return cls(sources, targets) if sources and targets else None


def _codes(text: str) -> tuple[str, ...]:
    return tuple(code.strip() for code in text.split(",") if code.strip())
