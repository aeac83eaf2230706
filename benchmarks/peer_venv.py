"""A peer's own virtual environment under ``.bench/``, created once: the one recipe the
benchmarks' and tests' peer venvs (engines, JoeyNMT, Argos Translate) share.

:func:`ensure_peer_venv` returns the venv's python, creating it first when it is missing or
holds something else than ``wanted`` (a stamp file records what it holds; a file lock makes a
second caller wait for the first install). torch goes in first, its version from ``wanted``,
so pip takes the CPU wheel (extra pip arguments for it from ``TORCH_PIP_ARGS``, as ``make``
sets them) and never a CUDA build; then the peer's packages.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def pip_install(python: Path, *args: str) -> None:
    cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *args]
    print("  $", shlex.join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def ensure_peer_venv(venv: Path, wanted: dict, torch: str, packages: Sequence[str]) -> Path:
    """The python of ``venv`` holding ``torch`` (a pip spec) and ``packages`` (``wanted``
    describes them all, for the stamp)."""
    python = venv_python(venv)
    stamp = venv / ".bench-installed.json"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and python.exists() and json.loads(stamp.read_text()) == wanted:
            return python
        print(f"creating {venv} ({wanted})", flush=True)
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip_install(python, *shlex.split(os.environ.get("TORCH_PIP_ARGS", "")), torch)
        pip_install(python, *packages, torch)
        stamp.write_text(json.dumps(wanted))
    return python
