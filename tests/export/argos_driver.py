"""Install an Argos Translate package and translate through argostranslate's own API.

Run by test_export_argos_install.py with the python of ``.bench/venv-argos`` (argostranslate
1.11, `make argos-venv`), never by pytest itself::

    python argos_driver.py PACKAGE FROM TO < lines.json > result.json

The caller points HOME and XDG_* at a temporary directory, so Argos' package directory, cache
and settings are the test's own. Everything runs as Argos runs it: ``install_from_path``
extracts the zip into the package directory, ``Package`` reads ``metadata.json`` and
``sentencepiece.model``, ``translate.translate`` encodes, decodes with CTranslate2 (Argos'
settings: beam 4, length penalty 0.2, compute type auto unless ARGOS_* says otherwise) and
detokenizes. One part is replaced, and only it: the sentence splitter. MiniSBD would fetch its
ONNX model on first use and this machine has no network; every input given here is one
sentence, so the replacement returns its text whole.
"""

from __future__ import annotations

import json
import sys


class OneSentence:
    """Stands in for MiniSBDSentencizer: the whole text is one sentence."""

    def __init__(self, pkg: object) -> None:
        self.pkg = pkg

    def split_sentences(self, text: str) -> list[str]:
        return [text]


def main(package: str, from_code: str, to_code: str) -> dict:
    from argostranslate import package as argos_package
    from argostranslate import settings, translate

    translate.MiniSBDSentencizer = OneSentence  # the one replacement (see the docstring)
    argos_package.install_from_path(package)
    installed = [
        {
            key: getattr(p, key)
            for key in (
                "from_code",
                "from_name",
                "to_code",
                "to_name",
                "package_version",
                "argos_version",
                "type",
            )
        }
        | {"dir": p.package_path.name, "tokenizer": type(p.tokenizer).__name__}
        for p in argos_package.get_installed_packages()
    ]
    lines = json.load(sys.stdin)
    translation = translate.get_translation_from_codes(from_code, to_code)
    return {
        "installed": installed,
        "package_dir": str(settings.package_data_dir),
        "languages": [lang.code for lang in translate.get_installed_languages()],
        "sentencizer": type(translation.underlying.sentencizer).__name__,
        "translations": [translate.translate(line, from_code, to_code) for line in lines],
    }


if __name__ == "__main__":
    json.dump(main(*sys.argv[1:4]), sys.stdout)
