"""Target-language tags and ``SRC-TGT=SOURCE`` specs (mtkit.data.tags)."""

from __future__ import annotations

import pytest

from mtkit.data.tags import (
    Direction,
    check_tags,
    parse_pair,
    parse_pairs,
    split_tag,
    tag,
    tag_lines,
)
from mtkit.errors import MtkitError


@pytest.mark.parametrize(
    "text, expected",
    [
        (">>fr<< A dog.", (">>fr<<", " A dog.")),
        (">>fr<<A dog.", (">>fr<<", "A dog.")),
        ("A dog >>fr<<", ("", "A dog >>fr<<")),
        (">>fr A dog", ("", ">>fr A dog")),
        ("", ("", "")),
    ],
)
def test_split_tag_as_marian(text: str, expected: tuple[str, str]) -> None:
    assert split_tag(text) == expected


def test_parse_pair() -> None:
    assert parse_pair("en-pt_BR=data/a-b=c.tsv") == Direction("en", "pt_BR", "data/a-b=c.tsv")
    assert parse_pair("en-de=hf:wmt/wmt14:train").name == "en-de"
    assert tag("pt_BR") == ">>pt_BR<<"


@pytest.mark.parametrize(
    "spec, message",
    [
        ("en-de", "--pair en-de: expected SRC-TGT=SOURCE"),
        ("ende=data", "--pair ende=data: expected SRC-TGT=SOURCE"),
        ("en-=data", "expected SRC-TGT=SOURCE"),
        ("en-de=", "expected SRC-TGT=SOURCE"),
        ("en-d e=x", "expected SRC-TGT=SOURCE"),
        ("en-en=x", "--pair en-en=x: source and target language are the same"),
    ],
)
def test_bad_pair(spec: str, message: str) -> None:
    with pytest.raises(MtkitError, match=message):
        parse_pair(spec)


def test_a_pair_given_twice() -> None:
    with pytest.raises(MtkitError, match="^--valid-pair en-de is given twice$"):
        parse_pairs(["en-de=a", "en-fr=b", "en-de=c"], "--valid-pair")


def test_check_tags_names_the_known_ones() -> None:
    check_tags([">>de<<"], [">>de<<", ">>fr<<"], "m.model")
    with pytest.raises(MtkitError, match=r"m.model: no >>cs<< symbol \(its tags: >>de<<, >>fr<<\)"):
        check_tags([">>cs<<"], [">>fr<<", ">>de<<"], "m.model")


TAGS = [">>de<<", ">>fr<<"]


def test_tag_lines() -> None:
    lines = ["a dog", ">>fr<< a cat", " >>de<< x", "", "  ", ">>weird tag<< y"]
    assert tag_lines(lines, "de", TAGS) == [
        ">>de<< a dog",
        ">>fr<< a cat",
        ">>de<< x",
        "",
        "  ",
        ">>de<< >>weird tag<< y",
    ]
    assert tag_lines(lines, "", TAGS)[:3] == ["a dog", ">>fr<< a cat", ">>de<< x"]
    assert tag_lines(lines, "", []) == lines  # a bilingual model reads lines as they are


@pytest.mark.parametrize(
    "lines, tgt_lang, tags, message",
    [
        (["a"], "de", [], "--tgt-lang de: this model was not trained multilingual"),
        (["a"], "cs", TAGS, r"--tgt-lang cs: unknown target language \(known: de, fr\)"),
        (
            ["a", ">>cs<< b"],
            "",
            TAGS,
            r"line 7: unknown target-language tag >>cs<< \(known: de, fr\)",
        ),
    ],
)
def test_tag_lines_errors(lines: list, tgt_lang: str, tags: list, message: str) -> None:
    with pytest.raises(MtkitError, match=message):
        tag_lines(lines, tgt_lang, tags, first_number=6)
