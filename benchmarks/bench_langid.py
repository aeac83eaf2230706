"""Language identification (issue 28): py3langid (mtkit's identifier, :mod:`mtkit.text.langid`)
against lingua-language-detector on Multi30k test_2016_flickr, and the rule of ``"source":
"auto"`` in `mtkit serve`.

First table: per identifier, the share of the captions of each language (en, de, fr, cs) given
that language, choosing among every language the identifier knows ("all") and among the four
("4"); microseconds per caption (one thread, after loading); loading time (building the
identifier and identifying one caption per language: lingua loads its models at first use) and
the resident memory added by loading and running it, given once per identifier (on the "all"
row: the "4" row reuses what is loaded); and the installed size of the package. The
``mtkit`` rows are :func:`mtkit.text.langid.identify` (spans removed, the softmax taken over
the candidates), the ``py3langid`` rows the package itself (``classify``). lingua is measured
when it can be imported (``pip install lingua-language-detector``), else its rows say so.

Second table: :func:`mtkit.text.langid.source_language` with each language as a model's source
in turn: the share of the other three languages' captions refused (higher is better), and of
the source language's own captions and of their first 1, 2, 3 and 5 words refused (spurious
refusals: lower is better); beside it, the naive rule "refuse when another language comes
first".

    .venv/bin/python benchmarks/bench_langid.py [--limit 1000] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import time
from collections.abc import Callable
from pathlib import Path

from machine import print_machine
from multi30k import read_text

from mtkit.text import langid

LANGS = ("en", "de", "fr", "cs")
PREFIXES = (1, 2, 3, 5)
Identify = Callable[[str], str]


def rss_mib() -> float:
    """This process's resident memory now, in MiB."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def installed_mib(distribution: str) -> float:
    """The size of a distribution's installed files, in MiB."""
    files = importlib.metadata.distribution(distribution).files or []
    return sum(f.locate().stat().st_size for f in files if f.locate().is_file()) / 2**20


def py3langid_builder(candidates: tuple[str, ...] | None) -> Identify:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE)
    if candidates:
        identifier.set_languages(list(candidates))
    return lambda text: identifier.classify(text)[0]


def mtkit_builder(candidates: tuple[str, ...] | None) -> Identify:
    langid.load()

    def identify(text: str) -> str:
        ranked = langid.identify(text, candidates)
        return ranked[0][0] if ranked else ""

    return identify


def lingua_builder(candidates: tuple[str, ...] | None) -> Identify:
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    if candidates:
        codes = [getattr(IsoCode639_1, code.upper()) for code in candidates]
        chosen = [Language.from_iso_code_639_1(code) for code in codes]
        detector = LanguageDetectorBuilder.from_languages(*chosen).build()
    else:
        detector = LanguageDetectorBuilder.from_all_languages().build()

    def identify(text: str) -> str:
        found = detector.detect_language_of(text)
        return found.iso_code_639_1.name.lower() if found else ""

    return identify


IDENTIFIERS = {  # name: (builder, distribution)
    "mtkit": (mtkit_builder, "py3langid"),
    "py3langid": (py3langid_builder, "py3langid"),
    "lingua": (lingua_builder, "lingua-language-detector"),
}


def accuracy_rows(data: dict[str, list[str]]) -> list[str]:
    rows = []
    for name, (builder, distribution) in IDENTIFIERS.items():
        try:
            size = f"{installed_mib(distribution):.1f}"
        except importlib.metadata.PackageNotFoundError:
            rows.append(f"{name:<10} not installed (pip install {distribution})")
            continue
        for label, candidates in (("all", None), ("4", LANGS)):
            before, start = rss_mib(), time.perf_counter()
            identify = builder(candidates)
            for lang in LANGS:
                identify(data[lang][0])
            load = time.perf_counter() - start
            cells, seconds, lines = [], 0.0, 0
            for lang in LANGS:
                start = time.perf_counter()
                found = [identify(line) for line in data[lang]]
                seconds += time.perf_counter() - start
                lines += len(found)
                cells.append(f"{100 * found.count(lang) / len(found):6.1f}")
            loaded = f"{load:7.2f} {rss_mib() - before:8.0f}" if candidates is None else " " * 16
            rows.append(
                f"{name:<10} {label:<4} {' '.join(cells)} {seconds / lines * 1e6:9.0f} "
                f"{loaded} {size:>9}"
            )
    return rows


def rule_rows(data: dict[str, list[str]]) -> list[str]:
    prefixes = {
        k: {lang: [" ".join(line.split()[:k]) for line in data[lang]] for lang in LANGS}
        for k in PREFIXES
    }
    rows = []
    for source in LANGS:
        for rule, refused in (("mtkit", _refused_by_rule), ("naive", _refused_if_not_first)):
            foreign = [line for lang in LANGS if lang != source for line in data[lang]]
            cells = [_share(foreign, source, refused), _share(data[source], source, refused)]
            cells += [_share(prefixes[k][source], source, refused) for k in PREFIXES]
            rows.append(f"{source:<7} {rule:<6} " + " ".join(f"{c:8.1f}" for c in cells))
    return rows


def _refused_by_rule(text: str, source: str) -> bool:
    return not langid.source_language(text, [source]).accepted


def _refused_if_not_first(text: str, source: str) -> bool:
    ranked = langid.identify(text)
    return bool(ranked) and ranked[0][0] != source


def _share(texts: list[str], source: str, refused: Callable[[str, str], bool]) -> float:
    return 100 * sum(refused(text, source) for text in texts) / len(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=1000, help="captions per language")
    parser.add_argument("--quick", action="store_true", help="100 captions per language")
    args = parser.parse_args()
    limit = 100 if args.quick else args.limit
    data = {lang: read_text("test_2016_flickr", lang)[:limit] for lang in LANGS}
    print_machine()
    print(f"\nMulti30k test_2016_flickr, {limit} captions per language: % identified correctly")
    print(
        f"{'':<10} {'set':<4} {'  '.join(f'{lang:>5}' for lang in LANGS)}  us/line  load s  "
        f"RSS MiB  size MiB"
    )
    print("\n".join(accuracy_rows(data)))
    print(
        f'\n"source": "auto": % refused (MIN_LETTERS {langid.MIN_LETTERS}, ODDS '
        f"{langid.ODDS}); naive: refused when another language comes first"
    )
    words = " ".join(f"{k} word{'s' if k > 1 else ''}".rjust(8) for k in PREFIXES)
    print(f"{'source':<7} {'rule':<6} {'foreign':>8} {'own':>8} {words}")
    print("\n".join(rule_rows(data)))


if __name__ == "__main__":
    main()
