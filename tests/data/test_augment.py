"""The augmentation modifiers change what they say and only that (property tests)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtkit.data import augment as modify

WORDS = st.lists(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Zs", "Cc")), min_size=1),
    min_size=0,
    max_size=12,
)
SPACES = st.sampled_from([" ", "  ", "\t", " \u00a0 "])


@st.composite
def texts(draw: st.DrawFn) -> str:
    words = draw(WORDS)
    return "".join(w + draw(SPACES) for w in words).strip()


def words_of(text: str) -> list[str]:
    return text.split()


@given(texts())
@settings(max_examples=200, deadline=None)
def test_titlecase_changes_only_first_letters(text: str) -> None:
    out = modify.titlecase(text)
    before, after = words_of(text), words_of(out)
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        if old[0].isalpha():
            assert new == old[0].upper() + old[1:]
        else:
            assert new == old
    assert modify.titlecase(out) == out  # idempotent


def test_case_modifiers_on_examples() -> None:
    assert modify.titlecase("a dog's ball,\tüber 2 cats") == "A Dog's Ball,\tÜber 2 Cats"
    assert modify.titlecase("iPhone USA") == "IPhone USA"
    assert modify.uppercase("Straße") == "STRASSE"
    assert modify.lowercase("ÉCOLE Normale") == "école normale"


@given(texts())
@settings(max_examples=200, deadline=None)
def test_strip_final_removes_final_punctuation_only(text: str) -> None:
    out = modify.strip_final(text + ".")
    assert text.rstrip().startswith(out) or out == text.rstrip()
    assert not out.endswith((".", "!", "?", "…", "。"))
    assert modify.strip_final(out) == out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A dog.", "A dog"),
        ("Wow!?", "Wow"),
        ("Etc...", "Etc"),
        ("No stop", "No stop"),
        ('He said "hi."', 'He said "hi."'),
        ("3.5", "3.5"),
        ("Ende。", "Ende"),
        ("Wow ! !", "Wow"),  # marks apart: all of them (hypothesis found '! !' + '.' -> '!')
        ("! !.", ""),
    ],
)
def test_strip_final_examples(text: str, expected: str) -> None:
    assert modify.strip_final(text) == expected


def edits(old: str, new: str, kind: str) -> bool:
    """Whether ``new`` is ``old`` with one typo of ``kind``."""
    if kind == "drop":
        return any(old[:i] + old[i + 1 :] == new for i in range(len(old)))
    if kind == "double":
        return any(old[: i + 1] + old[i:] == new for i in range(len(old)))
    if kind == "swap":
        swaps = (old[:i] + old[i + 1] + old[i] + old[i + 2 :] for i in range(len(old) - 1))
        return new in swaps
    diff = [i for i in range(len(old)) if len(old) == len(new) and old[i] != new[i]]
    if len(diff) != 1:
        return False
    a, b = old[diff[0]], new[diff[0]]
    return b.lower() in modify.NEIGHBOURS[a.lower()] and a.isupper() == b.isupper()


WORD = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABCXYZ"), min_size=2, max_size=12)


@given(WORD, st.sampled_from(modify.TYPO_KINDS), st.integers(0, 10**6))
@settings(max_examples=300, deadline=None)
def test_typo_is_one_edit_of_its_kind(word: str, kind: str, seed: int) -> None:
    out = modify.typo(word, kind, random.Random(seed))
    if kind == "swap" and len(set(word)) == 1:
        assert out == word
        return
    assert edits(word, out, kind), (word, out)


def test_typo_off_the_keyboard_doubles() -> None:
    assert modify.typo("éé", "neighbour", random.Random(0)) == "ééé"


@given(texts(), st.integers(0, 10**6), st.floats(0.01, 1.0))
@settings(max_examples=200, deadline=None)
def test_typos_touch_only_long_words_each_once(text: str, seed: int, rate: float) -> None:
    out = modify.typos(text, random.Random(seed), rate)
    before, after = words_of(text), words_of(out)
    assert len(before) == len(after)
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    eligible = [w for w in before if sum(ch.isalpha() for ch in w) >= 3]
    for old, new in changed:
        assert old in eligible
        assert abs(len(old) - len(new)) <= 1 and new
    if not eligible:
        assert out == text
    else:  # at least one word chosen (a swap of equal letters may look unchanged)
        assert changed or any(len(set(w)) < len(w) for w in eligible)


def test_typos_rate_is_the_share_of_words() -> None:
    rng = random.Random(3)
    text = " ".join(["house"] * 1000)
    changed = sum(w != "house" for w in modify.typos(text, rng, 0.15).split())
    assert 110 <= changed <= 190


@given(st.integers(0, 10**6))
@settings(max_examples=200, deadline=None)
def test_noise_line_has_no_letters(seed: int) -> None:
    line = modify.noise_line(random.Random(seed))
    assert 1 <= len(line.split(" ")) <= 6 and all(line.split(" "))
    assert not any(ch.isalpha() for ch in line)
    assert line == modify.noise_line(random.Random(seed))


def test_merge_joins_with_and_without_final_punctuation() -> None:
    parts = ["A dog runs. ", "Two cats sit!", "A bird"]
    assert modify.merge(parts, strip=False) == "A dog runs. Two cats sit! A bird"
    assert modify.merge(parts, strip=True) == "A dog runs Two cats sit A bird"
