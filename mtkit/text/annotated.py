"""A text with its sentence ranges: ``gap sentence gap sentence ... gap``.

As Bergamot's annotated text (``src/translator/annotation.h``), the original is kept unchanged
and the sentences are ranges into it (here: character offsets, ``text[start:end]``), in order
and not overlapping. What lies between them are the gaps (whitespace, line breaks, a byte-order
mark): one more gap than sentences. A translation puts new sentences into the same gaps, so the
layout (blank lines, ``\\r\\n``, indentation, no final newline) comes back exactly.

Planned for an engine (:func:`mtkit.text.plan.plan`), a text also holds a multilingual model's
leading ``>>xx<<`` tag (taken off ``text``), per sentence its untranslatable spans masked
(:mod:`mtkit.text.span_masking`) and the *units* it was cut into: the lines an engine translates,
each with where it starts in the (masked) sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mtkit.errors import MtkitError

if TYPE_CHECKING:
    from mtkit.text.span_masking import Masked

Unit = tuple[str, int]  # a line an engine translates, and where it starts in its sentence


@dataclass(frozen=True)
class AnnotatedText:
    """``text`` and its sentences, ``(start, end)`` character ranges into it; once planned,
    its ``tag`` and per sentence its ``masked`` form (None: translated as it is) and ``units``."""

    text: str
    sentences: tuple[tuple[int, int], ...] = ()
    tag: str = ""
    masked: tuple[Masked | None, ...] = ()
    units: tuple[tuple[Unit, ...], ...] = ()

    def __post_init__(self) -> None:
        for name in ("masked", "units"):
            if getattr(self, name) and len(getattr(self, name)) != len(self.sentences):
                raise MtkitError(f"{name} for {len(getattr(self, name))} of {len(self)} sentences")
        last = 0
        for start, end in self.sentences:
            if not last <= start < end <= len(self.text):
                raise MtkitError(
                    f"sentence range ({start}, {end}) out of order or empty in a "
                    f"text of {len(self.text)} characters"
                )
            last = end

    def __len__(self) -> int:
        """The number of sentences."""
        return len(self.sentences)

    def sentence(self, i: int) -> str:
        start, end = self.sentences[i]
        return self.text[start:end]

    def gap(self, i: int) -> str:
        """What lies before sentence ``i`` (``i == len(self)``: after the last one)."""
        if not 0 <= i <= len(self.sentences):
            raise IndexError(f"gap {i} of a text with {len(self.sentences)} sentences")
        start = self.sentences[i - 1][1] if i > 0 else 0
        end = self.sentences[i][0] if i < len(self.sentences) else len(self.text)
        return self.text[start:end]

    def all_sentences(self) -> list[str]:
        return [self.text[start:end] for start, end in self.sentences]

    def all_units(self) -> list[str]:
        """The units of every sentence, in order (none before planning)."""
        return [unit for units in self.units for unit, _ in units]

    def rebuild(self, translations: Sequence[str]) -> str:
        """The text with sentence ``i`` replaced by ``translations[i]``, every gap as it was."""
        if len(translations) != len(self.sentences):
            raise MtkitError(
                f"{len(translations)} translations for {len(self.sentences)} sentences"
            )
        out = [self.gap(0)]
        for i, sentence in enumerate(translations, start=1):
            out += [sentence, self.gap(i)]
        return "".join(out)
