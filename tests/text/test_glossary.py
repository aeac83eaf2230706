"""Glossary terms found on word boundaries, and the files they come from."""

from pathlib import Path

import pytest
import torch

from mtkit.config import SearchConfig
from mtkit.decoding.beam import max_target_lengths
from mtkit.errors import MtkitError
from mtkit.text.glossary import Glossary, constraining, read_glossary, split_constraints

TERMS = Glossary(
    [
        ("cat", "Katze"),
        ("New York", "New York"),
        ("New York City", "NYC"),
        ("C++", "C++"),
        ("York", "Yorck"),
    ]
)


@pytest.mark.parametrize(
    ("text", "targets"),
    [
        ("a cat sits", ["Katze"]),
        ("cats and concatenate", []),  # inside longer words: no
        ("cat, cat.", ["Katze"]),  # once per sentence
        ("to New York City and York", ["NYC", "Yorck"]),  # leftmost, then longest
        ("New York's C++ code", ["New York", "C++"]),  # punctuation ends a word; symbols match
        ("a Cat", []),  # case-sensitive
        ("", []),
    ],
)
def test_terms_are_found_on_word_boundaries(text: str, targets: list[str]) -> None:
    assert TERMS.targets(text) == targets


def test_ignore_case_and_later_pairs_win() -> None:
    folded = Glossary([("cat", "Katze"), ("CAT", "Kater")], ignore_case=True)
    assert len(folded) == 1 and folded.targets("A Cat") == ["Kater"]
    assert TERMS.extended([("cat", "Mieze")]).targets("cat") == ["Mieze"]


def test_constraining_keeps_given_phrases_as_given_then_adds_terms() -> None:
    constrain = constraining(TERMS, {3: ["Haus", "Haus"]})
    assert constrain("a cat", 3) == ["Haus", "Haus", "Katze"]
    assert constrain("a cat", 4) == ["Katze"]
    assert constraining(None) is None


def test_split_constraints_is_fairseqs_convention() -> None:
    assert split_constraints("a cat\tKatze\t\t rote Katze ") == ("a cat", ["Katze", "rote Katze"])
    assert split_constraints("no tab") == ("no tab", [])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("cat\tKatze\ndog\n", "line 2: expected source term<TAB>target term, found 1 field"),
        ("cat\tKatze\ta\n", "line 1: expected source term<TAB>target term, found 3 fields"),
        ("cat\t \n", "line 1: a glossary entry needs a source and a target term"),
        ("x\t" + "y" * 201 + "\n", "line 1: a glossary term of 201 characters"),
    ],
)
def test_bad_glossary_files_name_the_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "g.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(MtkitError, match=message):
        read_glossary(str(path))


def test_a_glossary_file_reads_with_bom_comments_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "g.tsv"
    path.write_bytes("\ufeff# terms\r\ncat\tKatze\r\n\r\ndog\tHund\r\n".encode())
    assert read_glossary(str(path)).pairs == (("cat", "Katze"), ("dog", "Hund"))
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(MtkitError, match="not UTF-8"):
        read_glossary(str(path))


def test_max_target_length_is_the_search_limit() -> None:
    for cfg in [SearchConfig(), SearchConfig(max_len_a=0.5, max_len_b=3, min_len=9)]:
        src = torch.full((40, 41), 0)
        for n in range(40):
            src[n, : n + 1] = 5
            src[n, n + 1] = 3  # EOS; 0 pads
        limits = max_target_lengths(src, cfg.max_len_a, cfg.max_len_b, cfg.min_len, 30)
        assert limits.tolist() == [cfg.max_target_length(n + 1, 30) for n in range(40)]
