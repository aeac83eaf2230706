"""Outputs whole or not at all: staged_file's rename, its clean-up, and the parents it makes."""

import os
import stat
from pathlib import Path

import pytest

from mtkit.errors import MtkitError
from mtkit.staging import staged_file


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_staged_file_appears_whole_with_the_usual_modes(tmp_path: Path) -> None:
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    old = os.umask(0o022)
    try:
        with staged_file(path) as handle:
            handle.write(b"new ")
            assert path.read_bytes() == b"old"  # not yet
            handle.write(b"content")
    finally:
        os.umask(old)
    assert path.read_bytes() == b"new content"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert tree(tmp_path) == ["out.bin"]


def test_staged_file_makes_missing_parents(tmp_path: Path) -> None:
    with staged_file(tmp_path / "a" / "b" / "out.txt") as handle:
        handle.write(b"x")
    assert (tmp_path / "a" / "b" / "out.txt").read_bytes() == b"x"


def test_an_error_in_the_block_leaves_the_tree_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_bytes(b"old")
    for target in (tmp_path / "keep.txt", tmp_path / "new" / "dir" / "out.txt"):
        with pytest.raises(KeyboardInterrupt):
            with staged_file(target) as handle:
                handle.write(b"partial")
                raise KeyboardInterrupt
        assert tree(tmp_path) == ["keep.txt"]  # no temporary, no directory made for it
    assert (tmp_path / "keep.txt").read_bytes() == b"old"


def test_a_failed_rename_names_the_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(MtkitError, match=r"d/out\.txt: cannot write \(No space left on device\)"):
        with staged_file(tmp_path / "d" / "out.txt") as handle:
            handle.write(b"x")
    assert tree(tmp_path) == []


def test_refuses_a_directory_and_a_file_as_parent(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_bytes(b"")
    with pytest.raises(MtkitError, match=r"adir: is a directory"):
        with staged_file(tmp_path / "adir"):
            pass
    not_a_dir = r"afile/out\.txt: cannot write \(.*afile is not a directory\)"
    with pytest.raises(MtkitError, match=not_a_dir):
        with staged_file(tmp_path / "afile" / "out.txt"):
            pass
    assert tree(tmp_path) == ["adir", "afile"]
