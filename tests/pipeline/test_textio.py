"""textio: file reading (gzip, stdin, missing files) and atomic writes; the line rules and
invalid UTF-8 are tested for every reader in tests/data/test_lines.py."""

import gzip
import io
import os
import stat
import sys
from pathlib import Path

import pytest

from mtkit.errors import MtkitError
from mtkit.pipeline.textio import (
    atomic_write_lines,
    atomic_write_text,
    read_lines,
)

BOM = b"\xef\xbb\xbf"


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(MtkitError, match=rf"^{tmp_path}/nope.txt: no such file$"):
        read_lines(tmp_path / "nope.txt")
    with pytest.raises(MtkitError, match="is a directory"):
        read_lines(tmp_path)


def test_gzip(tmp_path: Path) -> None:
    path = tmp_path / "f.de.gz"
    path.write_bytes(gzip.compress(BOM + b"eins\r\nzwei\r\n"))
    assert read_lines(path) == ["eins", "zwei"]
    bad = tmp_path / "bad.gz"
    bad.write_bytes(b"not gzip at all\n")
    with pytest.raises(MtkitError, match="bad.gz: corrupt or truncated gzip"):
        read_lines(bad)
    truncated = tmp_path / "truncated.gz"
    truncated.write_bytes(gzip.compress(b"line\n" * 1000)[:-20])
    with pytest.raises(MtkitError, match="truncated.gz:.*gzip"):
        read_lines(truncated)


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = io.TextIOWrapper(io.BytesIO(BOM + b"a\r\n\xff\n"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", fake)
    with pytest.raises(MtkitError, match=r"^<stdin>:2: invalid UTF-8"):
        read_lines("-")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x\r\ny\n")))
    assert read_lines("-") == ["x", "y"]
    assert not sys.stdin.closed  # stdin is not ours to close


def test_atomic_write_text(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    atomic_write_text(path, "eins\nzwei\r\n")
    assert path.read_bytes() == b"eins\nzwei\r\n"  # line ends written as given
    atomic_write_lines(path, ["drei", "vier"])
    assert read_lines(path) == ["drei", "vier"]
    assert path.read_bytes() == b"drei\nvier\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]  # no temporary left behind


def test_atomic_write_respects_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "out.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out.txt").stat().st_mode) == 0o644


def test_atomic_write_missing_directory_is_made(tmp_path: Path) -> None:
    atomic_write_text(tmp_path / "nope" / "out.txt", "x\r\n")
    assert (tmp_path / "nope" / "out.txt").read_bytes() == b"x\r\n"
    (tmp_path / "nope" / "out.txt").unlink()
    (tmp_path / "nope").rmdir()
    (tmp_path / "adir").mkdir()
    with pytest.raises(MtkitError, match="adir: is a directory"):
        atomic_write_text(tmp_path / "adir", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]


def test_atomic_write_failure_keeps_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "out.txt"
    path.write_text("old\n")

    def fail(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(MtkitError, match="out.txt: cannot write \\(No space left on device\\)"):
        atomic_write_text(path, "new\n")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
