"""The one line rule (mtkit.data.lines) and every reader that applies it, over the same table."""

from __future__ import annotations

import gzip
import hashlib
import io
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mtkit.data import corpus
from mtkit.data.lines import decode_line, decode_lines
from mtkit.errors import MtkitError
from mtkit.pipeline import textio, translate

BOM = b"\xef\xbb\xbf"

# (file bytes, lines every reader yields)
EDGE_CASES = [
    pytest.param(b"", [], id="empty"),
    pytest.param(BOM, [], id="only-bom"),
    pytest.param(b"\n", [""], id="only-newline"),
    pytest.param(BOM + b"\n", [""], id="bom-newline"),
    pytest.param(b"\n\n", ["", ""], id="empty-lines"),
    pytest.param(b"a", ["a"], id="one-line-no-final-newline"),
    pytest.param(b"a\nb", ["a", "b"], id="no-final-newline"),
    pytest.param(b"a\n\nb\n", ["a", "", "b"], id="lf"),
    pytest.param(b"a\r\nb\r\n", ["a", "b"], id="crlf"),
    pytest.param(b"a\r\nb", ["a", "b"], id="crlf-no-final-newline"),
    pytest.param(b"a\nb\r\n", ["a", "b"], id="mixed-line-ends"),
    pytest.param(BOM + b"a\r\nb\r\n", ["a", "b"], id="bom-crlf"),
    pytest.param(b"a\rb\n", ["a\rb"], id="lone-cr-inside"),
    pytest.param(b"a\r\r\n", ["a\r"], id="cr-before-crlf"),
    pytest.param(b"\r", [""], id="only-cr"),
    pytest.param(b"a\n\r", ["a", ""], id="last-line-only-cr"),
    pytest.param(b"a\n" + BOM + b"b\n", ["a", "\ufeffb"], id="bom-not-first-is-text"),
    pytest.param(BOM + BOM + b"x", ["\ufeffx"], id="second-bom-is-text"),
    pytest.param("x\u2028y\x85z\x0cw\n".encode(), ["x\u2028y\x85z\x0cw"], id="no-other-breaks"),
    pytest.param(b"  a\tb \x00 \n", ["  a\tb \x00 "], id="whitespace-and-nul-kept"),
    pytest.param("Grüße 你好 🙂\n".encode(), ["Grüße 你好 🙂"], id="non-ascii"),
]

Reader = Callable[[Path], list[str]]


def _translate(path: Path) -> list[str]:
    with open(path, "rb") as stream:
        return list(translate.read_lines(stream))


def _text_source(path: Path) -> list[str]:
    return list(corpus.TextSource(path, path).sentences(("src",)))


READERS: dict[str, Reader] = {
    "textio.read_lines": textio.read_lines,
    "textio.iter_lines": lambda path: list(textio.iter_lines(path)),
    "corpus.read_lines": lambda path: list(corpus.read_lines(path)),
    "corpus.read_lines+sha256": lambda path: list(corpus.read_lines(path, hashlib.sha256())),
    "corpus.TextSource": _text_source,
    "translate.read_lines": _translate,
}
GZIP_READERS = ["textio.read_lines", "corpus.read_lines", "corpus.read_lines+sha256"]
STRICT_READERS = [name for name in READERS if name != "translate.read_lines"]


@pytest.mark.parametrize("data, expected", EDGE_CASES)
def test_every_reader_reads_the_same_lines(tmp_path: Path, data: bytes, expected: list[str]):
    (tmp_path / "f.txt").write_bytes(data)
    (tmp_path / "f.txt.gz").write_bytes(gzip.compress(data))
    read = {name: reader(tmp_path / "f.txt") for name, reader in READERS.items()}
    read |= {f"{name}(gz)": READERS[name](tmp_path / "f.txt.gz") for name in GZIP_READERS}
    assert read == dict.fromkeys(read, expected)


@pytest.mark.parametrize("data, expected", EDGE_CASES)
def test_decode_lines_as_a_binary_file_iterates(data: bytes, expected: list[str]) -> None:
    assert list(decode_lines(io.BytesIO(data), "f")) == expected


INVALID = b"ok\r\nbad \xff here\r\n\xc3(\n"
MESSAGES = [
    "{path}:2: invalid UTF-8 (byte 0xff at byte 5 of the line)",
    "{path}:3: invalid UTF-8 (byte 0xc3 at byte 1 of the line)",
]


@pytest.mark.parametrize(
    "reader, suffix", [(r, "") for r in STRICT_READERS] + [(r, ".gz") for r in GZIP_READERS]
)
def test_strict_readers_name_file_and_line(tmp_path: Path, reader: str, suffix: str) -> None:
    path = tmp_path / f"bad.txt{suffix}"
    path.write_bytes(gzip.compress(INVALID) if suffix else INVALID)
    with pytest.raises(MtkitError) as err:
        READERS[reader](path)
    assert str(err.value) == MESSAGES[0].format(path=path)


def test_translate_replaces_and_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "bad.txt"
    path.write_bytes(INVALID)
    assert _translate(path) == ["ok", "bad \ufffd here", "\ufffd("]
    warning = "mtkit translate: warning: {}, bad bytes replaced by U+FFFD\n"
    assert capsys.readouterr().err == "".join(warning.format(m.format(path=path)) for m in MESSAGES)


def test_translate_names_a_stream_without_a_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert list(translate.read_lines(io.BytesIO(b"\xff\n"))) == ["\ufffd"]
    assert "warning: <input>:1: invalid UTF-8 (byte 0xff at byte 1" in capsys.readouterr().err


def test_translate_reports_the_first_ten_invalid_lines(capsys: pytest.CaptureFixture[str]):
    assert len(list(translate.read_lines(io.BytesIO(b"\xff\n" * 12)))) == 12
    err = capsys.readouterr().err.splitlines()
    assert len(err) == translate.MAX_ENCODING_WARNINGS == 10
    assert err[-1].startswith("mtkit translate: warning: <input>:10: invalid UTF-8")
    assert err[-1].endswith("replaced by U+FFFD (further invalid lines not reported)")


@pytest.mark.parametrize(
    "raw, number, expected",
    [
        (b"a\n", 1, "a"),
        (b"a\r\n", 2, "a"),
        (b"a", 3, "a"),
        (b"a\r", 1, "a"),  # the last line of a CRLF file cut before its LF
        (b"a\n\n", 1, "a\n"),  # one line end only: the caller splits lines
        (BOM + b"a\n", 1, "a"),
        (BOM + b"a\n", 2, "\ufeffa"),  # a BOM only starts a file
        (BOM, 1, ""),
        (b"", 1, ""),
    ],
)
def test_decode_line(raw: bytes, number: int, expected: str) -> None:
    assert decode_line(raw, "f", number) == expected


@pytest.mark.parametrize(
    "raw, replaced, byte, at",
    [
        (b"\xff\n", "\ufffd", "0xff", 1),
        (b"ab\xe2\x82\r\n", "ab\ufffd", "0xe2", 3),  # a sequence cut by the line end
        ("é".encode() + b"\xc3(", "é\ufffd(", "0xc3", 3),
        (b"\xff\xfeh\x00", "\ufffd\ufffdh\x00", "0xff", 1),  # UTF-16
    ],
)
def test_decode_line_invalid_strict_and_lenient(raw: bytes, replaced: str, byte: str, at: int):
    message = f"f:4: invalid UTF-8 (byte {byte} at byte {at} of the line)"
    with pytest.raises(MtkitError) as err:
        decode_line(raw, "f", 4)
    assert str(err.value) == message
    reported: list[str] = []
    assert decode_line(raw, "f", 4, on_invalid=reported.append) == replaced
    assert reported == [message]


lines_strategy = st.lists(
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r\n")), max_size=8
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
