"""recut: a translation that covers too little of its source is cut again, at a candidate."""

from __future__ import annotations

import pytest

from mtkit.engines.base import Engine, Translation
from mtkit.text import translate_text
from mtkit.text.recut import merged, short_units

MERGED = "A child is splashing in the water Three people sit at a picnic table outside."
FIRST, SECOND = "A child is splashing in the water", "Three people sit at a picnic table outside."


def hyp(text: str) -> list[Translation]:
    return [Translation(text, -1.0, -2.0, len(text.split()))]


def test_a_short_translation_with_a_candidate_is_cut_there() -> None:
    assert short_units([MERGED], [hyp("Ein Kind planscht im Wasser.")]) == {0: [FIRST, SECOND]}


@pytest.mark.parametrize(
    "unit, translation",
    [
        (
            MERGED,
            "Ein Kind planscht im Wasser. Drei Leute sitzen an einem Tisch draußen.",
        ),  # covered
        (
            "a child is splashing in the water three people sit at a table",
            "Ein Kind.",
        ),  # no capital
        ("Two men with Red Sox caps and A Boston Terrier", "Zwei Männer mit Red Sox Mützen und"),
        ("A man Three", "Ein"),
    ],  # too short to judge
)
def test_capital_letters_alone_never_cut(unit: str, translation: str) -> None:
    assert short_units([unit], [hyp(translation)]) == {}


def test_a_script_without_spaces_is_not_short() -> None:
    """Translations of two words for fifteen (a script without spaces) are not short; among
    them, one of one word covers too little."""
    units = [f"{MERGED} {n}" for n in range(6)]
    dense = [hyp("xxxx yyyy") for _ in units]
    assert short_units(units, dense) == {}
    assert short_units(units[:1], dense[:1]) == {0: [FIRST, f"{SECOND} 0"]}  # too few to tell
    dense[3] = hyp("xxxx")
    assert short_units(units, dense) == {3: [FIRST, f"{SECOND} 3"]}
    # each text its own typical ratio: four units, or two, are too few to tell
    assert short_units(units, dense, [4, 2]) == {i: [FIRST, f"{SECOND} {i}"] for i in range(6)}


def test_parts_translations_replace_the_unit() -> None:
    results = [hyp("X"), hyp("Ein Kind."), []]
    out = merged(
        ["", f"{FIRST} {SECOND}", ""],
        results,
        {1: [FIRST, SECOND]},
        [hyp("Ein Kind. "), hyp("Drei Leute.")],
    )
    assert out[0] == hyp("X") and out[2] == []
    assert out[1] == [Translation("Ein Kind. Drei Leute.", -2.0, -4.0, 4)]


class Stub:
    """An engine that translates a unit of more than 6 words as its first 2 (stops early)."""

    def __init__(self, engine: Engine) -> None:
        self.src_tokenizer, self.max_source_pieces = engine.src_tokenizer, 1000
        self.unit_pieces = 1000
        self.config = engine.config
        self.sentence_style, self.source_words = engine.sentence_style, engine.source_words
        self.calls: list[list[str]] = []

    def translate(self, lines, search=None, first_number=1, progress=None, constraints=None):  # noqa: ARG002
        self.calls.append(list(lines))
        return [hyp(" ".join(line.split()[:2]).upper()) for line in lines]


def test_translate_text_translates_the_parts_again(engine: Engine) -> None:
    stub = Stub(engine)
    (out,) = translate_text(stub, [f"  {MERGED}\n"], "en")  # type: ignore[arg-type]
    assert stub.calls == [[MERGED], [FIRST, SECOND]]
    assert out == "  A CHILD THREE PEOPLE\n"
