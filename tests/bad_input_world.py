"""The bad-input matrix's world: the shared fixtures' data, file makers, full-disk patches
and output checks that the rows of test_bad_input.py are built from."""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from training.training_helpers import train_args

from mtkit import staging as staging_module
from mtkit.checkpoint import load_checkpoint
from mtkit.checkpoint import storage as checkpoint_module
from mtkit.cli import cli
from mtkit.config import SearchConfig, TranslateConfig
from mtkit.pipeline import translate as translate_module

REPO = Path(__file__).resolve().parents[1]
FAST = ["--beam", "1", "--max-len-a", "0", "--max-len-b", "3", "-q"]
FAST_CONFIG = TranslateConfig(SearchConfig(beam=1, max_len_a=0.0, max_len_b=3))
MB_LINE = b"the man " * 131072  # a 1 MiB line


@dataclass
class World:
    """What the rows refer to: a trained run, a dataset, spm models, a crafted pickle."""

    run: Path  # {run}: a 4-update run directory (checkpoints 2 and 4, last, best)
    ckpt: Path  # {ckpt}: its checkpoint_last.pt
    data: Path  # {data}: the tiny binarized dataset
    spm: Path  # {spm}: a joint en-de sentencepiece model for the corpus rows
    marker: Path  # the file the crafted pickle would create
    crafted: bytes  # a torch.save file whose unpickling runs `touch marker`
    plain_spm: bytes  # sentencepiece with its default ids (pad -1, unk 0, bos 1, eos 2)

    def translate(self, lines: list[str]) -> list[str]:
        return translate_module.translate_lines([str(self.ckpt)], lines, FAST_CONFIG)


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


Make = Callable[[World, Path], None]  # creates the file or directory at the path
Check = Callable[[World, Path, Outcome], None]  # asserts the output of a legitimate input


@dataclass
class Row:
    id: str
    args: list[str]  # {t} (the row's directory), {run}, {ckpt}, {data}, {spm}
    files: dict[str, bytes | Make] = field(default_factory=dict)
    error: str = ""  # regex for the one-line error; empty: legitimate input, see ``check``
    check: Check | None = None
    stdin: bytes | None = None
    patch: Callable[[pytest.MonkeyPatch], None] | None = None
    real: bool = False  # through a subprocess
    nonroot: bool = False  # needs a process that cannot read a file of mode 000 (not root)


# ---------------------------------------------------------------------------------------------
# Files


def crafted(w: World, path: Path) -> None:
    path.write_bytes(w.crafted)


def truncated_ckpt(w: World, path: Path) -> None:
    data = w.ckpt.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def other_tool_ckpt(w: World, path: Path) -> None:
    torch.save({"state_dict": {"weight": torch.zeros(2)}, "epoch": 3}, path)


def future_ckpt(w: World, path: Path) -> None:
    ckpt = load_checkpoint(w.ckpt)
    torch.save({**ckpt, "format_version": 99, "mtkit_version": "9.0"}, path)


def ckpt_with(**changes: object) -> Make:
    def make(w: World, path: Path) -> None:
        ckpt = load_checkpoint(w.ckpt)
        for key, value in changes.items():
            section, _, name = key.partition("__")
            if name:
                ckpt[section] = {**ckpt[section], name: value}
            else:
                ckpt[section] = value
        torch.save(ckpt, path)

    return make


def run_copy(*edits: tuple[str, Make]) -> Make:
    """A copy of the trained run, with files replaced."""

    def make(w: World, path: Path) -> None:
        shutil.copytree(w.run, path)
        for name, edit in edits:
            (path / name).unlink()
            edit(w, path / name)

    return make


def data_copy(name: str, content: bytes | Make) -> Make:
    """A copy of the dataset with one file replaced."""

    def make(w: World, path: Path) -> None:
        shutil.copytree(w.data, path)
        if callable(content):
            content(w, path / name)
        else:
            (path / name).write_bytes(content)

    return make


def empty_train_split(w: World, path: Path) -> None:
    shutil.copytree(w.data, path)
    for side in ("src", "tgt"):
        (path / f"train.{side}.bin").write_bytes(b"")
        (path / f"train.{side}.idx").write_bytes(b"\0" * 8)


def plain_spm(w: World, path: Path) -> None:
    path.write_bytes(w.plain_spm)


def truncated_spm(w: World, path: Path) -> None:
    data = w.spm.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def unreadable(content: bytes) -> Make:
    def make(w: World, path: Path) -> None:
        path.write_bytes(content)
        path.chmod(0)

    return make


def directory(w: World, path: Path) -> None:
    path.mkdir()


def lines(*items: str) -> bytes:
    return "".join(f"{item}\n" for item in items).encode()


EN = lines("A man is running in the park.", "Two dogs play on the street.", "The child waits.")
DE = lines("Ein Mann läuft im Park.", "Zwei Hunde spielen auf der Straße.", "Das Kind wartet.")


def head(text: bytes, n: int) -> bytes:
    return b"".join(text.splitlines(keepends=True)[:n])


def windows(text: bytes) -> bytes:
    """The same text as an editor on Windows saves it: a BOM and CRLF line ends."""
    return b"\xef\xbb\xbf" + text.replace(b"\n", b"\r\n")


def utf16(text: bytes) -> bytes:
    return text.decode().encode("utf-16")


def metrics(*records: dict) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


VALID = [
    {"update": 2, "valid_bleu": 1.5, "elapsed": 60.0},
    {"update": 4, "valid_bleu": 3.0, "elapsed": 120.0},
]


# ---------------------------------------------------------------------------------------------
# Patches: a full disk


def enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def full_disk_in_checkpoint_writer(mp: pytest.MonkeyPatch) -> None:
    """The checkpoint writer gets part of the file out, then the disk is full."""

    def save(obj: object, handle: io.BufferedWriter, *args: object, **kwargs: object) -> None:
        handle.write(b"PK\x03\x04" + b"\0" * 4096)
        raise enospc()

    mp.setattr(checkpoint_module.torch, "save", save)


def full_disk_in_file_output(mp: pytest.MonkeyPatch) -> None:
    """Every write to a staged output file (translations, vocabularies, ...) finds the disk full."""
    real = os.fdopen

    class Full(io.BufferedWriter):
        def write(self, data: object) -> int:
            raise enospc()

    def fdopen(fd: int, mode: str = "r", *args: object, **kwargs: object) -> object:
        if mode == "wb":
            return Full(real(fd, "wb", buffering=0))
        return real(fd, mode, *args, **kwargs)

    mp.setattr(staging_module.os, "fdopen", fdopen)


def full_disk_in_dataset_writer(mp: pytest.MonkeyPatch) -> None:
    from mtkit.data.binarized import SplitWriter

    def add_arrays(self: SplitWriter, *arrays: object) -> None:
        raise enospc()

    mp.setattr(SplitWriter, "add_arrays", add_arrays)


class torch_threads:
    """One torch thread (tiny models), restored after; --threads would change it globally."""

    def __init__(self, n: int) -> None:
        self.n, self.before = n, torch.get_num_threads()

    def __enter__(self) -> None:
        torch.set_num_threads(self.n)

    def __exit__(self, *exc: object) -> None:
        torch.set_num_threads(self.before)


def invoke(args: list[str], stdin: bytes | None = None) -> Outcome:
    with torch_threads(1):
        result = CliRunner().invoke(cli, args, input=stdin)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a traceback: the bug this matrix exists to find
    return Outcome(result.exit_code, result.stdout, result.stderr)


SPM = ["spm", "train", "--model-prefix", "{t}/m", "--vocab-size", "40"]
PREPARE = ["prepare", "--spm", "{spm}", "-o", "{t}/bin", "--workers", "0"]
PAIR = {"c.en": EN, "c.de": DE}
AVERAGE = ["average", "-c", "{ckpt}", "-o", "{t}/avg.pt"]
TRANSLATE = ["translate", *FAST]
TO_FILE = ["-i", "{t}/in.txt", "-o", "{t}/out.txt"]
EVALUATE = ["evaluate", "-i", "{t}/h.txt", "-r", "{t}/r.txt"]
HR = {"h.txt": lines("the cat sat"), "r.txt": lines("the cat sat")}
EXPORT = ["export", "--format", "ctranslate2"]
PLOT = ["plot", "{t}/run", "-o", "{t}/curve.png"]
CRAFTED = r"refused: loading it would call posix\.system"
TRUNCATED = r"x\.pt: unreadable checkpoint \(truncated or corrupt"


def tiny_train(*extra: str) -> list[str]:
    return train_args(Path("{data}"), Path("{t}/run"), "--max-updates", "2", *extra)


def run_real(args: list[str], stdin: bytes | None, cwd: Path) -> Outcome:
    done = subprocess.run(
        [sys.executable, "-m", "mtkit", *args],
        input=stdin,
        cwd=cwd,
        capture_output=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=120,
    )
    return Outcome(done.returncode, done.stdout.decode(), done.stderr.decode())


def reads_anything(tmp_path: Path) -> bool:
    """Whether a file of mode 000 is readable here (as root, with CAP_DAC_OVERRIDE)."""
    probe = tmp_path / ".mode-000"
    probe.write_bytes(b"x")
    probe.chmod(0)
    try:
        probe.read_bytes()
        return True
    except PermissionError:
        return False
    finally:
        probe.unlink()


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}
