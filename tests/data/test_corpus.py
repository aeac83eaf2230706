"""Corpus readers: line reading edge cases, text/TSV/HF sources, resolution, one-line errors."""

from __future__ import annotations

import gzip
import hashlib
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtkit.data.corpus import (
    HfSource,
    TextSource,
    TsvSource,
    open_source,
    read_lines,
)
from mtkit.errors import MtkitError


def lines_of(path: Path) -> list[str]:
    return list(read_lines(path))


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(
        st.text(
            st.characters(exclude_categories=("Cs",), exclude_characters="\n\r\ufeff"), max_size=12
        )
    ),
    crlf=st.booleans(),
    final_newline=st.booleans(),
    gz=st.booleans(),
)
def test_read_lines_recovers_the_lines(
    lines: list[str], crlf: bool, final_newline: bool, gz: bool
) -> None:
    end = "\r\n" if crlf else "\n"
    text = end.join(lines) + (end if final_newline and lines else "")
    expected = lines if final_newline or not lines or lines[-1] else lines[:-1]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("f.txt.gz" if gz else "f.txt")
        path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
        assert lines_of(path) == expected


def test_read_lines_hashes_the_file_as_stored(tmp_path: Path) -> None:
    data = "\ufeffeins\r\nzwei\n".encode()
    (tmp_path / "f.gz").write_bytes(gzip.compress(data))
    digest = hashlib.sha256()
    lines = list(read_lines(tmp_path / "f.gz", digest))
    assert lines == ["eins", "zwei"]
    assert digest.hexdigest() == hashlib.sha256((tmp_path / "f.gz").read_bytes()).hexdigest()


def test_not_gzip(tmp_path: Path) -> None:
    (tmp_path / "x.en.gz").write_bytes(b"plain text\n")
    with pytest.raises(MtkitError, match="x.en.gz: unreadable"):
        lines_of(tmp_path / "x.en.gz")


def test_text_source_chunks_and_describe(tmp_path: Path, write_corpus, corpus_pairs) -> None:
    source = open_source(write_corpus("text", corpus_pairs[:5]), "en", "de")
    assert isinstance(source, TextSource)
    chunks = list(source.chunks(2))
    assert [len(src) for src, _ in chunks] == [2, 2, 1]
    assert [p for src, tgt in chunks for p in zip(src, tgt, strict=True)] == corpus_pairs[:5]
    info = source.describe()
    data = (tmp_path / "corpus.en").read_bytes()
    assert info["src"] == {"path": str(tmp_path / "corpus.en"), "sha256": _sha(data)}


@pytest.mark.parametrize("n_src, n_tgt", [(5, 3), (3, 5), (0, 1), (4001, 4000)])
def test_line_count_mismatch(tmp_path: Path, n_src: int, n_tgt: int) -> None:
    (tmp_path / "c.en").write_text("x\n" * n_src)
    (tmp_path / "c.de").write_text("y\n" * n_tgt)
    source = open_source(str(tmp_path / "c"), "en", "de")
    message = f"c.en has {n_src} lines, .*c.de has {n_tgt}"
    with pytest.raises(MtkitError, match=message):
        list(source.chunks(1000))


def test_gzipped_prefix(tmp_path: Path) -> None:
    (tmp_path / "c.en.gz").write_bytes(gzip.compress(b"one\ntwo\n"))
    (tmp_path / "c.de").write_text("eins\nzwei\n")
    source = open_source(str(tmp_path / "c"), "en", "de")
    assert list(source.chunks(10)) == [(["one", "two"], ["eins", "zwei"])]


def test_tsv(tmp_path: Path) -> None:
    (tmp_path / "c.tsv").write_bytes(b"\xef\xbb\xbfa b\tc d\r\n\tonly target\n")
    source = open_source(str(tmp_path / "c.tsv"), "en", "de")
    assert isinstance(source, TsvSource)
    assert list(source.chunks(1)) == [(["a b"], ["c d"]), ([""], ["only target"])]
    assert source.describe()["sha256"] == _sha((tmp_path / "c.tsv").read_bytes())


@pytest.mark.parametrize("line, found", [("one column", 1), ("a\tb\tc", 3), ("", 1)])
def test_tsv_needs_two_columns(tmp_path: Path, line: str, found: int) -> None:
    (tmp_path / "c.tsv").write_text(f"a\tb\n{line}\n")
    with pytest.raises(MtkitError, match=rf"c\.tsv: line 2: expected 2 .*found {found}"):
        list(open_source(str(tmp_path / "c.tsv"), "en", "de").chunks(10))


@pytest.mark.parametrize("kind", ["parquet", "jsonl", "disk"])
def test_hf_sources_read_the_translation_schema(write_corpus, corpus_pairs, kind: str) -> None:
    source = open_source(write_corpus(kind, corpus_pairs[:7]), "en", "de", split="valid")
    assert isinstance(source, HfSource)
    chunks = list(source.chunks(3))
    assert [len(src) for src, _ in chunks] == [3, 3, 1]
    assert [p for src, tgt in chunks for p in zip(src, tgt, strict=True)] == corpus_pairs[:7]
    assert source.describe()["type"] in ("hf-file", "hf-disk")


def test_hf_flat_language_columns(tmp_path: Path) -> None:
    (tmp_path / "flat.jsonl").write_text('{"en": "Hi", "de": "Hallo"}\n{"en": null, "de": "x"}\n')
    source = open_source(str(tmp_path / "flat.jsonl"), "en", "de")
    assert list(source.chunks(10)) == [(["Hi", ""], ["Hallo", "x"])]


def test_hf_missing_language(write_corpus, corpus_pairs) -> None:
    source = open_source(write_corpus("jsonl", corpus_pairs[:2]), "en", "fr")
    with pytest.raises(MtkitError, match=r"no 'fr' in 'translation' \(found \['de', 'en'\]\)"):
        list(source.chunks(10))


def test_hf_wrong_columns(tmp_path: Path) -> None:
    (tmp_path / "x.jsonl").write_text('{"text": "hello"}\n')
    with pytest.raises(MtkitError, match=r"expected a 'translation' column .*found \['text'\]"):
        list(open_source(str(tmp_path / "x.jsonl"), "en", "de").chunks(10))


@pytest.mark.parametrize(
    "name, data, message",
    [
        ("bad.jsonl", b'{"translation": {"en": "a", "de": "b"}}\n{broken\n', "unreadable .JSON"),
        ("bad.parquet", b"PAR1 not really", "bad.parquet: .*not a parquet file"),
    ],
)
def test_hf_corrupt_files(tmp_path: Path, name: str, data: bytes, message: str) -> None:
    (tmp_path / name).write_bytes(data)
    with pytest.raises(MtkitError, match=message):
        list(open_source(str(tmp_path / name), "en", "de").chunks(10))


def test_hf_saved_dataset_dict_picks_the_split(tmp_path: Path, corpus_pairs) -> None:
    import datasets

    def rows(pairs: list) -> list:
        return [{"translation": {"en": s, "de": t}} for s, t in pairs]

    splits = {"train": corpus_pairs[:4], "validation": corpus_pairs[4:6]}
    data = datasets.DatasetDict({k: datasets.Dataset.from_list(rows(v)) for k, v in splits.items()})
    data.save_to_disk(str(tmp_path / "dd"))
    for split, hf_split in (("train", "train"), ("valid", "validation")):
        (src, tgt), *_ = open_source(str(tmp_path / "dd"), "en", "de", split=split).chunks(10)
        assert list(zip(src, tgt, strict=True)) == splits[hf_split]
    with pytest.raises(MtkitError, match="no split test .*has train, validation"):
        list(open_source(str(tmp_path / "dd"), "en", "de", split="test").chunks(10))


def test_unknown_hub_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets
    from datasets.exceptions import DatasetNotFoundError

    def not_found(name: str, *args: object, **kwargs: object) -> None:
        raise DatasetNotFoundError(f"Dataset '{name}' doesn't exist on the Hub")

    monkeypatch.setattr(datasets, "load_dataset", not_found)
    source = open_source("hf:nobody/nothing", "en", "de", hf_config="de-en")
    with pytest.raises(MtkitError, match=r"^unknown dataset nobody/nothing \(Dataset"):
        list(source.chunks(10))


@pytest.mark.parametrize(
    "spec, split, fmt, hf_config, expected",
    [
        ("hf:wmt/wmt14", "train", "auto", "de-en", ("hub", "wmt/wmt14", "train")),
        ("hf:wmt/wmt14", "valid", "auto", "de-en", ("hub", "wmt/wmt14", "validation")),
        ("hf:wmt/wmt14:test[:100]", "test", "auto", "", ("hub", "wmt/wmt14", "test[:100]")),
        ("wmt/wmt14", "test", "auto", "de-en", ("hub", "wmt/wmt14", "test")),  # not a file
        ("wmt/wmt14", "valid", "hf", "", ("hub", "wmt/wmt14", "validation")),
    ],
)
def test_hub_specs(spec: str, split: str, fmt: str, hf_config: str, expected: tuple) -> None:
    source = open_source(spec, "en", "de", split=split, fmt=fmt, hf_config=hf_config)
    assert isinstance(source, HfSource)
    assert (source.kind, source.name, source.split) == expected
    assert source.config == hf_config


@pytest.mark.parametrize(
    "spec, fmt, message",
    [
        ("missing", "auto", r"missing: no such corpus \(looked for missing.en and missing.de"),
        ("missing.tsv", "auto", "missing.tsv: no such file"),
        ("missing.parquet", "auto", "missing.parquet: no such file"),
        ("half", "auto", "half.de: no such file"),  # half.en exists
        ("missing", "text", "missing.en: no such file"),
        ("x", "csv", "unknown corpus format 'csv'"),
    ],
)
def test_resolution_errors(tmp_path: Path, monkeypatch, spec: str, fmt: str, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "half.en").write_text("a\n")
    with pytest.raises(MtkitError, match=message):
        open_source(spec, "en", "de", fmt=fmt)


def test_sentences_of_one_side_read_one_file(tmp_path: Path) -> None:
    (tmp_path / "c.en").write_text("a\nb\n")
    (tmp_path / "c.de").write_text("only one line\n")  # misaligned, but not read
    source = open_source(str(tmp_path / "c"), "en", "de")
    assert list(source.sentences(("src",))) == ["a", "b"]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
