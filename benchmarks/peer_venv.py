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


def torch_spec() -> str:
    """The torch version running this benchmark, without a local tag (2.13.0+cpu -> 2.13.0)."""
    import torch

    return f"torch=={torch.__version__.split('+')[0]}"


def installed_versions(python: Path, dists: Sequence[str]) -> dict[str, str]:
    """The versions of the distributions ``dists`` in the venv of ``python``."""
    code = "import json; from importlib.metadata import version; "
    code += f"print(json.dumps({{d: version(d) for d in {list(dists)!r}}}))"
    out = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def ensure_tool_venv(venv: Path, tool: str, spec: str, extras: Sequence[str]) -> Path:
    """The python of ``venv`` holding this interpreter's torch version, the peer ``tool`` (its
    pip ``spec``) and ``extras``; what it installed is printed when the venv is new."""
    wanted = {"torch": torch_spec(), tool: spec, "extra": list(extras)}
    fresh = not (venv / ".bench-installed.json").is_file()
    python = ensure_peer_venv(venv, wanted, wanted["torch"], [spec, *extras])
    if fresh:
        versions = installed_versions(python, ("torch", tool, "sentencepiece"))
        print(f"  installed {versions}", flush=True)
    return python
