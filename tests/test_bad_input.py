"""The bad-input matrix: every subcommand against broken, hostile or unusual input.

One row per case. An error row expects a non-zero exit, exactly one line of output (on stderr)
matching the culprit regex, no traceback, nothing on stdout and no file or directory left
behind (the tree under the row's directory is the same before and after). A legitimate-input
row (CRLF, a BOM, empty lines, ...) expects exit 0 and checks the output. Rows run through
click's CliRunner in this process; those marked ``real`` run ``python -m mtkit`` in a
subprocess, to show that no traceback reaches a real terminal either.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
import sentencepiece
import torch
from bad_input_rows import ROWS
from bad_input_world import (
    DE,
    EN,
    Row,
    World,
    invoke,
    reads_anything,
    run_real,
    torch_threads,
    tree,
)
from click.testing import CliRunner
from training.training_helpers import train_args

from mtkit.cli import cli

# ---------------------------------------------------------------------------------------------
# Running a row


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, tiny_dataset: Path, corpus_spm: Path):
    base = tmp_path_factory.mktemp("bad-input")
    run = base / "run"
    args = train_args(
        tiny_dataset,
        run,
        "--max-updates",
        "4",
        "--save-every",
        "2",
        "--validate-every",
        "2",
        "--set",
        "validate_bleu=false",
    )
    with torch_threads(1):
        result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    marker = base / "pwned"

    class Crafted:
        def __reduce__(self) -> tuple:
            return (os.system, (f"touch {marker}",))

    buffer = io.BytesIO()
    torch.save({"format": "mtkit-checkpoint", "format_version": 1, "model": Crafted()}, buffer)
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.Train(
        sentence_iterator=iter((EN + DE).decode().splitlines() * 20),
        model_writer=model,
        vocab_size=40,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    return World(
        run,
        run / "checkpoint_last.pt",
        tiny_dataset,
        corpus_spm,
        marker,
        buffer.getvalue(),
        model.getvalue(),
    )


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_bad_input(row: Row, world: World, tmp_path: Path, monkeypatch) -> None:
    if row.nonroot and reads_anything(tmp_path):
        pytest.skip("this process reads files whatever their mode (root)")
    for name, content in row.files.items():
        path = tmp_path / name
        if callable(content):
            content(world, path)
        else:
            path.write_bytes(content)
    places = {
        "t": tmp_path,
        "run": world.run,
        "ckpt": world.ckpt,
        "data": world.data,
        "spm": world.spm,
    }
    args = [re.sub(r"\{(\w+)\}", lambda m: str(places[m.group(1)]), a) for a in row.args]
    before = tree(tmp_path)
    if row.patch is not None:
        row.patch(monkeypatch)
    outcome = run_real(args, row.stdin, tmp_path) if row.real else invoke(args, row.stdin)
    monkeypatch.undo()
    assert not world.marker.exists(), "the crafted checkpoint ran its command"
    assert "Traceback" not in outcome.stderr + outcome.stdout
    if not row.error:
        assert outcome.code == 0, outcome.stderr
        assert row.check is not None
        row.check(world, tmp_path, outcome)
        return
    assert outcome.code != 0 and outcome.stdout == ""
    assert outcome.stderr.count("\n") == 1 and outcome.stderr.startswith("Error: "), outcome
    assert re.search(row.error, outcome.stderr), outcome.stderr
    assert tree(tmp_path) == before  # no partial output, no temporary left behind
    if row.check is not None:
        row.check(world, tmp_path, outcome)


def test_the_matrix_is_broad() -> None:
    commands = {row.args[0] for row in ROWS}
    assert commands == {
        "spm",
        "prepare",
        "train",
        "average",
        "translate",
        "evaluate",
        "export",
        "plot",
        "shortlist",
    }
    assert len(ROWS) >= 60 and len({row.id for row in ROWS}) == len(ROWS)
    assert sum(row.real for row in ROWS) >= 4 and sum(not row.error for row in ROWS) >= 20
