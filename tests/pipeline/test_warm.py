"""`mtkit translate --warm`: a resident process answers exactly what `mtkit translate` writes
without it, warnings included; one process per checkpoints and options, reused, replaced when
its socket is stale, gone after its idle seconds."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from mtkit.data.tokenizer import train_spm

sys.path.insert(0, str(Path(__file__).parents[1] / "export"))  # the export tests' models
from export_helpers import TRAIN, make_ckpt  # noqa: E402

FAST = ["--beam", "2", "--max-len-a", "0", "--max-len-b", "4", "--threads", "1"]
INPUT = b"a man runs\nthe red dog sits on the street\n\xff bad byte\n\n"


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> str:
    spm = train_spm([x for pair in TRAIN for x in pair], vocab_size=110)
    return str(make_ckpt(tmp_path_factory.mktemp("warm"), {"src": spm, "tgt": spm}).path)


@pytest.fixture
def runtime() -> Path:
    """A short runtime directory (a socket path must fit AF_UNIX's ~100 bytes); every
    resident process started there stopped afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="w", dir="/tmp"))
    yield folder
    for pid in _pids(folder):
        os.kill(pid, signal.SIGTERM)
    shutil.rmtree(folder, ignore_errors=True)


def _pids(folder: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"mtkit.pipeline.warm" in args and any(str(folder).encode() in a for a in args):
                found.append(int(proc.name))
    return found


def run(ckpt: str, runtime: Path, *args: str, data: bytes = INPUT) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    command = [sys.executable, "-m", "mtkit", "translate", "-m", ckpt, "-q", *FAST, *args]
    return subprocess.run(command, input=data, capture_output=True, env=env, timeout=300)


def test_a_resident_process_answers_what_translate_writes(ckpt: str, runtime: Path) -> None:
    cold = run(ckpt, runtime)
    first, again = run(ckpt, runtime, "--warm", "60"), run(ckpt, runtime, "--warm", "60")
    assert cold.returncode == first.returncode == again.returncode == 0, first.stderr
    assert first.stdout == again.stdout == cold.stdout and cold.stdout.count(b"\n") == 4
    assert first.stderr == again.stderr == cold.stderr  # the bad byte's warning, line 3
    assert b"<stdin>:3: invalid UTF-8" in cold.stderr
    sockets = list((runtime / "mtkit").glob("*.sock"))
    assert len(sockets) == 1 and len(_pids(runtime)) == 1  # one process, used twice
    other = run(ckpt, runtime, "--warm", "60", "--beam", "1")  # other options: another one
    assert other.returncode == 0 and len(list((runtime / "mtkit").glob("*.sock"))) == 2
    out = runtime / "out.de"
    to_file = run(ckpt, runtime, "--warm", "60", "-o", str(out))
    assert to_file.stdout == b"" and out.read_bytes() == cold.stdout


def test_a_stale_socket_is_replaced_and_an_idle_process_leaves(ckpt: str, runtime: Path) -> None:
    first = run(ckpt, runtime, "--warm", "1.5")
    (path,) = (runtime / "mtkit").glob("*.sock")
    deadline = time.monotonic() + 60
    while (path.exists() or _pids(runtime)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not path.exists() and not _pids(runtime)  # idle: gone, its socket removed
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))  # a socket whose process is gone
    stale.close()
    again = run(ckpt, runtime, "--warm", "30")
    assert again.returncode == 0 and again.stdout == first.stdout and path.exists()


@pytest.mark.parametrize(
    "args, says",
    [
        (["--format", "html"], "--warm: text input only, not --format html"),
        (["-i", "missing.en"], "missing.en: no such input file"),
    ],
)
def test_what_warm_refuses_is_said_in_one_line(ckpt, runtime, args, says) -> None:
    found = run(ckpt, runtime, "--warm", "30", *args)
    assert found.returncode != 0 and found.stderr.decode().strip().endswith(says)
    assert len(found.stderr.decode().strip().splitlines()) == 1 and not _pids(runtime)
