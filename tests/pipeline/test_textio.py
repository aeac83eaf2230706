"""textio: line reading (BOM, CRLF, gzip, stdin, invalid UTF-8) and atomic writes."""

import gzip
import io
import os
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mtkit.errors import MtkitError
from mtkit.pipeline.textio import (
    atomic_write_lines,
    atomic_write_text,
    decode_lines,
    iter_lines,
    read_lines,
)

BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"", []),
        (b"\n", [""]),
        (b"a", ["a"]),
        (b"a\n", ["a"]),
        (b"a\nb", ["a", "b"]),
        (b"a\n\nb\n", ["a", "", "b"]),
        (b"a\r\nb\r\n", ["a", "b"]),
        (b"a\r\nb", ["a", "b"]),
        (b"a\nb\r\n", ["a", "b"]),  # mixed line ends
        (BOM + b"a\r\nb\r\n", ["a", "b"]),
        (BOM, []),
        (BOM + b"\n", [""]),
        (b"a\n" + BOM + b"b\n", ["a", "\ufeffb"]),  # only a leading BOM is a BOM
        (b"a\rb\n", ["a\rb"]),  # a lone CR is not a line end
        ("x\u2028y\x85z\x0cw\n".encode(), ["x\u2028y\x85z\x0cw"]),  # nor what splitlines splits
        (b"  trailing  \n", ["  trailing  "]),  # whitespace is the caller's business
        ("Grüße 你好 🙂\n".encode(), ["Grüße 你好 🙂"]),
    ],
)
def test_read_lines(tmp_path: Path, data: bytes, expected: list[str]) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(data)
    assert read_lines(path) == expected
    assert list(iter_lines(str(path))) == expected


@pytest.mark.parametrize(
    "data, line, byte",
    [
        (b"\xff\n", 1, "0xff"),
        (b"ok\nok\nbad \xc3\x28 here\nok\n", 3, "0xc3"),
        (BOM + b"\xe2\x82\n", 1, "0xe2"),  # truncated sequence at the end of a line
        (b"ok\r\n\xa0\r\n", 2, "0xa0"),
    ],
)
def test_invalid_utf8_names_file_and_line(tmp_path: Path, data: bytes, line: int, byte: str):
    path = tmp_path / "bad.txt"
    path.write_bytes(data)
    with pytest.raises(MtkitError, match=rf"^{path}:{line}: invalid UTF-8 \(byte {byte}"):
        read_lines(path)


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


lines_strategy = st.lists(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n")),
    max_size=8,
)


@given(lines=lines_strategy, crlf=st.booleans(), bom=st.booleans(), final_newline=st.booleans())
def test_round_trip(lines: list[str], crlf: bool, bom: bool, final_newline: bool) -> None:
    if not bom and lines and lines[0].startswith("\ufeff"):
        lines = ["x" + lines[0], *lines[1:]]  # a leading U+FEFF is read as a byte-order mark
    end = "\r\n" if crlf else "\n"
    if final_newline or lines[-1:] == [""]:  # a last empty line needs its newline
        text = "".join(line + end for line in lines)
    else:
        text = end.join(lines)
    data = (BOM if bom else b"") + text.encode()
    assert list(decode_lines(io.BytesIO(data), "f")) == lines  # as a binary file iterates


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
