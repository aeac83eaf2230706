"""Where the documentation is: the repository root, the front page, docs/ and every README
whose links the tests check."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINKED = [
    README,
    *DOCS,
    ROOT / "benchmarks" / "README.md",
    *sorted(ROOT.glob("recipes/*/README.md")),
]
