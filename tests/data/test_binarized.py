"""The binarized dataset format: SplitWriter -> ParallelData round trips, and reader errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mtkit.data.binarized import (
    FORMAT_VERSION,
    MANIFEST,
    ParallelData,
    SplitWriter,
    read_manifest,
    token_dtype,
)
from mtkit.errors import MtkitError

SRC = [[5, 6, 7], [], [65535], [8]]
TGT = [[9], [10, 11], [12, 13, 14], []]


def write_manifest(directory: Path, dtype: str = "uint16", splits: tuple = ("train",)) -> None:
    manifest = {"format_version": FORMAT_VERSION, "dtype": dtype, "splits": dict.fromkeys(splits)}
    (directory / MANIFEST).write_text(json.dumps(manifest))


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("train.*"))}


@pytest.mark.parametrize("dtype", ["uint16", "int32"])
def test_round_trip(tmp_path: Path, dtype: str) -> None:
    with SplitWriter(tmp_path, "train", np.dtype(dtype)) as writer:
        writer.add_many(SRC[:2], TGT[:2])
        writer.add_many([], [])
        writer.add_many(SRC[2:], TGT[2:])
    assert writer.count == 4 and writer.tokens == {"src": 5, "tgt": 6}
    write_manifest(tmp_path, dtype)
    data = ParallelData(tmp_path, "train")
    assert len(data) == 4
    assert [(s.tolist(), t.tolist()) for s, t in map(data.pair, range(4))] == list(
        zip(SRC, TGT, strict=True)
    )
    assert data.src_lengths.tolist() == [3, 0, 1, 1] and data.tgt_lengths.tolist() == [1, 2, 3, 0]
    assert (tmp_path / "train.src.idx").read_bytes() == np.array([0, 3, 3, 4, 5]).tobytes()


def test_add_arrays_writes_the_same_bytes_as_add_many(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with SplitWriter(tmp_path / "a", "train", np.dtype(np.uint16)) as writer:
        writer.add_many(SRC, TGT)
    with SplitWriter(tmp_path / "b", "train", np.dtype(np.uint16)) as writer:
        for src, tgt in zip(SRC, TGT, strict=True):
            writer.add_arrays(np.array(src), np.array([len(src)]), np.array(tgt), [len(tgt)])
    assert files(tmp_path / "a") == files(tmp_path / "b")


def test_writer_rejects_inconsistent_input(tmp_path: Path) -> None:
    with SplitWriter(tmp_path, "train", np.dtype(np.uint16)) as writer:
        with pytest.raises(ValueError, match="2 source but 1 target"):
            writer.add_many([[1], [2]], [[3]])
        with pytest.raises(ValueError, match="src: 3 tokens but lengths sum to 2"):
            writer.add_arrays(np.arange(3), np.array([2]), np.arange(1), np.array([1]))


def test_empty_split(tmp_path: Path) -> None:
    SplitWriter(tmp_path, "train", np.dtype(np.uint16)).close()
    write_manifest(tmp_path)
    assert len(ParallelData(tmp_path, "train")) == 0


def test_token_dtype() -> None:
    assert token_dtype(8000) == np.uint16 and token_dtype(65536) == np.uint16
    assert token_dtype(65537) == np.int32


def test_reader_errors(tmp_path: Path) -> None:
    with pytest.raises(MtkitError, match="not an mtkit dataset"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({"format_version": 99}))
    with pytest.raises(MtkitError, match="dataset format 99"):
        read_manifest(tmp_path)
    write_manifest(tmp_path)
    with pytest.raises(MtkitError, match="no 'valid' split"):
        ParallelData(tmp_path, "valid")
    with pytest.raises(MtkitError, match="train.src.idx: missing"):
        ParallelData(tmp_path, "train")
    with SplitWriter(tmp_path, "train", np.dtype(np.uint16)) as writer:
        writer.add_many(SRC, TGT)
    with open(tmp_path / "train.tgt.bin", "r+b") as f:
        f.truncate(4)
    with pytest.raises(MtkitError, match="train.tgt.bin: size does not match"):
        ParallelData(tmp_path, "train")


def test_a_multilingual_split_knows_its_directions(multi_dataset: Path) -> None:
    valid = ParallelData(multi_dataset, "valid")
    assert valid.directions == {"en-de": (0, 8), "en-fr": (8, 16), "en-cs": (16, 24)}
    assert ParallelData(multi_dataset, "train").directions["en-cs"] == (120, 180)
