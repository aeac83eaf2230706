"""The Markdown tables of the READMEs and docs are well formed: a header row above each
separator and as many cells in every row as in the header (a table without its header row
renders as plain text on GitHub)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from docs_helpers import LINKED, ROOT

SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


def cells(row: str) -> int:
    """The number of cells in a table row (pipes inside inline code do not count)."""
    row = re.sub(r"`[^`\n]*`", "code", row.strip())
    return len(row.strip("|").split("|"))


def table_problems(name: str, text: str) -> list[str]:
    """`name:line: problem` for every separator without a header row above it, or table row
    whose number of cells differs from its header's, outside fenced code."""
    lines = text.splitlines()
    fenced, problems = False, []
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not SEPARATOR.match(line):
            continue
        header = lines[i - 1] if i else ""
        above = lines[i - 2] if i > 1 else ""
        if not header.startswith("|") or above.startswith("|"):
            problems.append(f"{name}:{i + 1}: a table separator without a header row above it")
            continue
        width = cells(header)
        if cells(line) != width:
            problems.append(
                f"{name}:{i + 1}: {cells(line)} cells in the separator, {width} in the header"
            )
        for j in range(i + 1, len(lines)):
            if not lines[j].startswith("|"):
                break
            if cells(lines[j]) != width:
                problems.append(f"{name}:{j + 1}: {cells(lines[j])} cells, the header has {width}")
    return problems


@pytest.mark.parametrize("page", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_tables_are_well_formed(page: Path) -> None:
    assert table_problems(page.name, page.read_text(encoding="utf-8")) == []


def test_a_table_without_its_header_is_reported() -> None:
    good = "text\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n| `x | y` | 3 |\n"
    assert table_problems("t.md", good) == []
    headless = "text\n\n|---|--:|\n| 1 | 2 |\n"
    assert table_problems("t.md", headless) == [
        "t.md:3: a table separator without a header row above it"
    ]
    ragged = "| a | b |\n|---|--:|\n| 1 | 2 | 3 |\n"
    assert table_problems("t.md", ragged) == ["t.md:3: 3 cells, the header has 2"]
    fenced = "```\n|---|---|\n```\n"
    assert table_problems("t.md", fenced) == []
