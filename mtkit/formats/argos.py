"""The Argos Translate package (``.argosmodel``) that `mtkit export --format argos` writes.

Read in argostranslate 1.11's own code (``package.py``, ``translate.py``, ``tokenizer.py``,
``sbd.py``) and in argos-train's packaging (``argostrain/train.py``). A package is a zip archive
of one directory, ``translate-{from}_{to}-{version with _}``, which installing extracts into
Argos' package directory::

    metadata.json        package_version, argos_version, from_code, from_name, to_code, to_name
                         (Argos reads these; "mtkit" holds the provenance, Argos ignores it)
    model/               the CTranslate2 model Argos decodes with
    sentencepiece.model  the ONE sentencepiece model Argos encodes the source with and decodes
                         the target pieces with
    README.md            shown by Argos as the package's description

No ``stanza/``, ``minisbd/`` or ``spacy/`` directory: Argos then splits sentences with
MiniSBD's model for ``from_code``, fetched on first use, as for any package without one.

How Argos turns target pieces into text (``SentencePieceTokenizer.decode`` and
``apply_packaged_translation``): ``sentencepiece.model`` decodes them (a piece it does not know
passes through as it is), every ``▁`` and ``_`` becomes a space, and one leading space goes;
:func:`detokenize` does the same. This module imports neither torch nor the model.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtkit.errors import MtkitError
from mtkit.languages import language_name

SUFFIX = ".argosmodel"
METADATA = "metadata.json"
MODEL_DIR = "model"
SPM = "sentencepiece.model"
README = "README.md"
ARGOS_VERSION = "1.11"  # the Argos Translate the layout was read from and tested with
_CODE = re.compile(r"^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$")  # en, de, zh-Hant: no "_", "/", ","
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*$")


@dataclass(frozen=True)
class PackageInfo:
    """What an Argos package says it is: its language pair and version."""

    from_code: str
    to_code: str
    package_version: str = "1.0"

    def __post_init__(self) -> None:
        for option, code in (("--source-lang", self.from_code), ("--target-lang", self.to_code)):
            if not _CODE.match(code):
                raise MtkitError(
                    f"{option} {code}: not a language code for Argos Translate "
                    "(letters and digits, parts joined by '-')"
                )
        if not _VERSION.match(self.package_version):
            raise MtkitError(
                f"--package-version {self.package_version}: expected numbers "
                "joined by dots, such as 1.0"
            )

    @property
    def dir_name(self) -> str:
        """The archive's top-level directory, as argos-train names it."""
        version = self.package_version.replace(".", "_")
        return f"translate-{self.from_code}_{self.to_code}-{version}"

    def metadata(self, **provenance: Any) -> dict[str, Any]:
        """``metadata.json``: the fields Argos reads, then ``mtkit``'s provenance."""
        return {
            "package_version": self.package_version,
            "argos_version": ARGOS_VERSION,
            "from_code": self.from_code,
            "from_name": language_name(self.from_code),
            "to_code": self.to_code,
            "to_name": language_name(self.to_code),
            "type": "translate",
            "mtkit": provenance,
        }

    def to_json(self, **provenance: Any) -> str:
        return json.dumps(self.metadata(**provenance), indent=4, ensure_ascii=False) + "\n"


def argos_text(decoded: str) -> str:
    """What Argos makes of the text sentencepiece decoded: ``▁`` and ``_`` are spaces, and a
    leading space goes.

    >>> argos_text("▁Hund▁rennt"), argos_text("snake_case")
    ('Hund rennt', 'snake case')
    """
    text = decoded.replace("▁", " ").replace("_", " ")
    return text[1:] if text.startswith(" ") else text


def detokenize(sp: Any, pieces: list[str]) -> str:
    """Target pieces as Argos Translate 1.11 turns them into text with the package's
    sentencepiece processor ``sp`` (pieces it does not know pass through as they are)."""
    return argos_text(sp.DecodePieces(pieces))


def read_package(path: Path) -> dict[str, Any]:
    """The ``metadata.json`` of the package ``path``, after checking what Argos needs: a zip
    of one directory holding the metadata, ``model/model.bin`` and ``sentencepiece.model``."""
    if not zipfile.is_zipfile(path):
        raise MtkitError(f"{path}: not an Argos Translate package (not a zip archive)")
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        tops = {name.split("/", 1)[0] for name in names}
        if len(tops) != 1:
            raise MtkitError(f"{path}: expected one top-level directory, found {sorted(tops)}")
        top = tops.pop()
        for part in (METADATA, f"{MODEL_DIR}/model.bin", SPM):
            if f"{top}/{part}" not in names:
                raise MtkitError(f"{path}: no {top}/{part}")
        try:
            meta = json.loads(archive.read(f"{top}/{METADATA}").decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            raise MtkitError(f"{path}: {top}/{METADATA} unreadable ({err})") from None
    if not isinstance(meta, dict) or not meta.get("from_code") or not meta.get("to_code"):
        raise MtkitError(f"{path}: {top}/{METADATA} names no from_code and to_code")
    return meta
