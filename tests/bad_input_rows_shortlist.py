"""The bad-input matrix's rows for lexical shortlists: `shortlist build`, `translate
--shortlist`, `export --shortlist` (ROWS is in bad_input_rows.py)."""

from __future__ import annotations

import re
from pathlib import Path

from bad_input_checks import translated_as
from bad_input_world import (
    EN,
    EXPORT,
    TO_FILE,
    TRANSLATE,
    Make,
    Outcome,
    Row,
    World,
    directory,
    empty_train_split,
)

from mtkit.checkpoint import Checkpoint
from mtkit.data.shortlist import Shortlist, read_shortlist

BUILD = ["shortlist", "build", "--data", "{data}", "-o", "{t}/s.gz"]
WITH = [*TRANSLATE, "-m", "{ckpt}", *TO_FILE, "--shortlist", "{t}/s.gz"]
EN_TEXT = EN.decode().splitlines()


def shortlist_of(frequent_all: bool, sha: str = "") -> Make:
    """A shortlist for the world's checkpoint: every target piece frequent, or none; ``sha``
    instead of the source spm's sha256 (another vocabulary)."""

    def make(w: World, path: Path) -> None:
        src, tgt = Checkpoint.load(w.ckpt).tokenizers()
        frequent = tuple(range(len(tgt))) if frequent_all else ()
        found = Shortlist(
            tuple(() for _ in range(len(src))),
            frequent,
            sha or src.sha256,
            tgt.sha256,
            len(src),
            len(tgt),
            "ibm1",
            1,
        )
        with path.open("wb") as handle:
            found.write(handle)

    return make


def built_for_the_run(w: World, t: Path, r: Outcome) -> None:
    summary = r".*s\.gz: ibm1 shortlist, top 100 of \d+ source pieces .*"
    assert re.fullmatch(summary, r.stdout.strip())
    src, tgt = Checkpoint.load(w.ckpt).tokenizers()
    read_shortlist(t / "s.gz").check_vocabularies(src, tgt, "s.gz")


SHORTLIST_ROWS = [
    Row("shortlist-build", BUILD, check=built_for_the_run),
    Row(
        "shortlist-missing-data",
        [*BUILD[:3], "{t}/nope", *BUILD[4:]],
        error=r"nope: not an mtkit dataset",
    ),
    Row(
        "shortlist-empty-train-split",
        [*BUILD[:3], "{t}/d", *BUILD[4:]],
        {"d": empty_train_split},
        r"d: the train split is empty",
    ),
    Row(
        "shortlist-output-directory",
        [*BUILD[:5], "{t}/out"],
        {"out": directory},
        r"-o .*out: is a directory",
    ),
    Row("shortlist-top-k-zero", [*BUILD, "--top-k", "0"], error=r"--top-k"),
    Row("shortlist-no-output", BUILD[:4], error=r"-o/--output: the shortlist file to write is"),
    Row("translate-shortlist-missing", WITH, {"in.txt": EN}, r"s\.gz: no such shortlist file"),
    Row(
        "translate-shortlist-not-gzip",
        WITH,
        {"in.txt": EN, "s.gz": b"hello"},
        r"s\.gz: not a shortlist file",
    ),
    Row(
        "translate-shortlist-other-vocabulary",
        WITH,
        {"in.txt": EN, "s.gz": shortlist_of(True, "0" * 64)},
        r"--shortlist .*s\.gz: built for another source vocabulary",
    ),
    Row(
        "translate-shortlist-full",
        WITH,
        {"in.txt": EN, "s.gz": shortlist_of(True)},
        check=translated_as(*EN_TEXT),
    ),
    Row(
        "export-shortlist-hf",
        ["export", "-m", "{ckpt}", "--format", "hf", "--shortlist", "{t}/s.gz", "{t}/hf"],
        {"s.gz": shortlist_of(True)},
        r"--shortlist applies to --format ctranslate2 only",
    ),
    Row(
        "export-shortlist-other-vocabulary",
        [*EXPORT, "-m", "{ckpt}", "--shortlist", "{t}/s.gz", "{t}/ct2"],
        {"s.gz": shortlist_of(False, "0" * 64)},
        r"built for another source vocabulary",
    ),
]
