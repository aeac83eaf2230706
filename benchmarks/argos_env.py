"""A separate virtual environment holding Argos Translate 1.11, where the test of `mtkit export
--format argos` installs the package and translates through argostranslate's API.

``ensure_argos_venv()`` creates ``.bench/venv-argos`` when it is missing (``make argos-venv``)
and returns its python; a stamp file records what it holds, a file lock makes two calls safe.
argostranslate pulls stanza, spaCy, MiniSBD (onnxruntime) and torch: torch goes in first, the
version of the interpreter running this, so pip takes the CPU wheel (extra pip arguments for
it from ``TORCH_PIP_ARGS``, as ``make`` sets them) and never a CUDA build. ctranslate2 and
sentencepiece are pinned to the versions installed here, so both sides decode with the same code.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".bench" / "venv-argos"
ARGOS_SPEC = "argostranslate==1.11.0"
PINNED = ("torch", "ctranslate2", "sentencepiece")  # the same versions as in this interpreter


def pinned_specs() -> dict[str, str]:
    """``name==version`` of the pinned packages installed here (local tags dropped)."""
    from importlib.metadata import PackageNotFoundError, version

    specs = {}
    for name in PINNED:
        try:
            specs[name] = f"{name}=={version(name).split('+')[0]}"
        except PackageNotFoundError:
            sys.exit(f"{name} is missing here: make install (it installs mtkit[ct2])")
    return specs


def venv_python(venv: Path = VENV) -> Path:
    return venv / "bin" / "python"


def _pip(python: Path, *args: str) -> None:
    cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *args]
    print("  $", shlex.join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def ensure_argos_venv(venv: Path = VENV) -> Path:
    """Create (once) the Argos Translate venv; return its python."""
    python = venv_python(venv)
    specs = pinned_specs()
    wanted = {"argostranslate": ARGOS_SPEC, **specs}
    stamp = venv / ".bench-installed.json"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and python.exists() and json.loads(stamp.read_text()) == wanted:
            return python
        print(f"creating {venv} ({', '.join(wanted.values())})", flush=True)
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        _pip(python, *shlex.split(os.environ.get("TORCH_PIP_ARGS", "")), specs["torch"])
        _pip(python, ARGOS_SPEC, *specs.values())
        stamp.write_text(json.dumps(wanted))
    return python


if __name__ == "__main__":
    print(ensure_argos_venv())
