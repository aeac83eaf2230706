"""`mtkit import` (mtkit/cli/importing.py): one-line errors, nothing written, exit codes."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from mtkit.cli import cli


def run(*args: str):
    return CliRunner().invoke(cli, ["import", *args])


def test_a_missing_directory_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    out = tmp_path / "model.pt"
    result = run(str(tmp_path / "nope"), "-o", str(out))
    assert result.exit_code == 1 and "nope" in result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert not out.exists()


def test_a_directory_without_config_json_is_refused(tmp_path: Path) -> None:
    (tmp_path / "hf").mkdir()
    result = run(str(tmp_path / "hf"), "-o", str(tmp_path / "model.pt"))
    assert result.exit_code == 1 and "config.json" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]


def test_only_the_hf_format_exists(tmp_path: Path) -> None:
    result = run(str(tmp_path), "--format", "fairseq", "-o", str(tmp_path / "m.pt"))
    assert result.exit_code == 2 and "fairseq" in result.output
