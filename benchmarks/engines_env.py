"""A separate virtual environment holding the peer engines bench_engines.py compares against.

``ensure_venv()`` creates ``.bench/venv-engines`` once and returns its python: torch of this
interpreter's version first (so pip takes the local CPU wheel; extra pip arguments for it from
``TORCH_PIP_ARGS``), then transformers, ctranslate2, sentencepiece and sacrebleu of the versions
installed here. A stamp file records what it holds; a file lock makes it safe to call twice.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / ".bench"
VENV = BENCH_DIR / "venv-engines"
PEER_PACKAGES = ("transformers", "ctranslate2", "sentencepiece", "sacrebleu")


def installed_versions() -> dict[str, str]:
    """The peer packages' versions in this venv (so both venvs decode with the same code)."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for name in ("torch", *PEER_PACKAGES):
        try:
            versions[name] = version(name).split("+")[0]
        except PackageNotFoundError:
            sys.exit(f"{name} is missing here: make install (it installs mtkit[hf,ct2])")
    return versions


def ensure_venv() -> Path:
    """Create .bench/venv-engines once (a stamp records what it holds); return its python."""
    import fcntl

    python = VENV / "bin" / "python"
    wanted = installed_versions()
    stamp = VENV / ".bench-installed.json"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / f"{VENV.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and python.exists() and json.loads(stamp.read_text()) == wanted:
            return python
        print(f"creating {VENV}: {wanted}", flush=True)
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        torch_args = shlex.split(os.environ.get("TORCH_PIP_ARGS", ""))
        subprocess.run([*pip, *torch_args, f"torch=={wanted['torch']}"], check=True)
        specs = [f"{name}=={wanted[name]}" for name in PEER_PACKAGES]
        subprocess.run([*pip, *specs, f"torch=={wanted['torch']}"], check=True)
        stamp.write_text(json.dumps(wanted))
    return python
