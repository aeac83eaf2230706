"""Glossaries: source terms whose translation is fixed, turned into lexical constraints.

A glossary is a list of ``source term -> target term`` pairs (a TSV file: one pair a line,
``source<TAB>target``; blank lines and lines starting with ``#`` are skipped). A sentence that
contains a source term, on word boundaries (not inside a longer word: "cat" is not found in
"cats" or "concatenate"), gets its target term as a constraint
(:mod:`mtkit.decoding.constrained`). Terms match case-sensitively unless ``ignore_case``. Where
terms overlap in a sentence, the leftmost wins, then the longest ("New York City" before "New
York" and "York"), as a reader would take them; each target term counts once per sentence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from mtkit.data.source_words import WORD
from mtkit.errors import MtkitError

# a unit (a sentence sent to the engine) and its text's line number -> its target phrases
Constrain = Callable[[str, int], list[str]]

MAX_TERM_CHARS = 200  # a longer term is a mistake (a whole sentence in one cell)


@dataclass(frozen=True)
class Glossary:
    """``pairs`` of (source term, target term); later pairs replace earlier ones with the same
    source term (the same term in another case, with ``ignore_case``)."""

    pairs: Sequence[tuple[str, str]]
    ignore_case: bool = False
    _targets: dict[str, str] = field(init=False, repr=False, compare=False)
    _pattern: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pairs", tuple(self.pairs))
        targets = {self._key(source): target for source, target in self.pairs}
        object.__setattr__(self, "_targets", targets)
        terms = sorted(targets, key=lambda t: (-len(t), t))  # longest first: the regex tries so
        pattern = None
        if terms:
            body = "|".join(re.escape(t) for t in terms)
            pattern = re.compile(
                rf"(?<!\w)(?:{body})(?!\w)", re.IGNORECASE if self.ignore_case else 0
            )
        object.__setattr__(self, "_pattern", pattern)

    def _key(self, term: str) -> str:
        return term.casefold() if self.ignore_case else term

    @cached_property
    def source_words(self) -> frozenset[str]:
        """The words of the source terms (runs of letters), lowercased: what spelling
        correction leaves alone (:mod:`mtkit.text.spelling`); read once per glossary, not
        per request."""
        return frozenset(w.lower() for source, _ in self.pairs for w in WORD.findall(source))

    def __len__(self) -> int:
        return len(self._targets)

    def targets(self, text: str) -> list[str]:
        """The target terms of the source terms found in ``text``, in order of appearance,
        each once."""
        if self._pattern is None:
            return []
        found = (self._targets[self._key(m.group())] for m in self._pattern.finditer(text))
        return list(dict.fromkeys(found))

    def extended(self, pairs: Iterable[tuple[str, str]]) -> Glossary:
        """This glossary with ``pairs`` added (replacing its own for the same source terms)."""
        return Glossary([*self.pairs, *pairs], self.ignore_case)


def check_pair(source: str, target: str, where: str) -> tuple[str, str]:
    """A pair with its terms stripped, or a one-line error naming ``where``."""
    source, target = source.strip(), target.strip()
    if not source or not target:
        raise MtkitError(f"{where}: a glossary entry needs a source and a target term")
    for term in (source, target):
        if len(term) > MAX_TERM_CHARS:
            raise MtkitError(
                f"{where}: a glossary term of {len(term)} characters (at most {MAX_TERM_CHARS})"
            )
        if "\t" in term or "\n" in term:
            raise MtkitError(f"{where}: a glossary term holds a tab or a line break")
    return source, target


def read_glossary(path: str, ignore_case: bool = False) -> Glossary:
    """A glossary from a TSV file (see the module docstring); a bad line is a one-line error
    naming the file and line."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise MtkitError(f"{path}: cannot read the glossary ({err.strerror or err})") from None
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        raise MtkitError(f"{path}: not UTF-8 (byte {err.start})") from None
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) != 2:
            fields = f"{len(cells)} field{'s' if len(cells) != 1 else ''}"
            raise MtkitError(
                f"{path}, line {number}: expected source term<TAB>target term, found {fields}"
            )
        pairs.append(check_pair(cells[0], cells[1], f"{path}, line {number}"))
    return Glossary(pairs, ignore_case)


def split_constraints(line: str) -> tuple[str, list[str]]:
    """fairseq's ``--constraints`` input: ``SOURCE<TAB>PHRASE<TAB>PHRASE...`` -> (source,
    phrases); a line without a tab is unconstrained; empty phrases are dropped."""
    source, *phrases = line.split("\t")
    return source, [p.strip() for p in phrases if p.strip()]


def constraining(
    glossary: Glossary | None, given: dict[int, list[str]] | None = None
) -> Constrain | None:
    """A unit's phrases: those ``given`` for its line number (explicit constraints), then the
    glossary's for the terms it contains; None when there is neither."""
    if glossary is None and given is None:
        return None

    def phrases(unit: str, number: int) -> list[str]:
        found = list(given.get(number, ())) if given else []  # as given (ordered: repeats)
        if glossary is not None:
            found.extend(t for t in glossary.targets(unit) if t not in found)
        return found

    return phrases
