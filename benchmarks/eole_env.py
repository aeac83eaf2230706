"""A separate virtual environment holding Eole 0.6.4 (the maintained successor of OpenNMT-py),
the second peer bench_train.py trains beside JoeyNMT.

``ensure_eole_venv()`` creates ``.bench/venv-eole`` when it is missing and returns its python;
a stamp file records what it holds (the eole version included), a file lock makes two calls
safe (see peer_venv.py). torch goes in first, the version of the interpreter running this, so
pip takes the CPU wheel (extra pip arguments for it from ``TORCH_PIP_ARGS``) and never a CUDA
build. Eole 0.6.4 is the newest release on PyPI; it requires ``torch>=2.10,<2.15``, which our
torch meets, so it installs with its own dependencies (no ``--no-deps``): they are many
(spaCy, datasets, tensorboard, ctranslate2, pyonmttok, fastapi ...), a few hundred MB, once.
One it does not declare goes in beside it: ``aiohttp``, which ``eole.bin`` imports (through its
``load_test`` tool) whatever the command, ``eole train`` included.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from joeynmt_env import BENCH_DIR, torch_spec
from peer_venv import ensure_peer_venv
from peer_venv import venv_python as peer_python

VENV = BENCH_DIR / "venv-eole"
EOLE_SPEC = "eole==0.6.4"
EXTRA_SPECS = ("aiohttp",)


def venv_python(venv: Path = VENV) -> Path:
    return peer_python(venv)


def _installed(python: Path) -> dict[str, str]:
    code = "import json, torch, sentencepiece as s; from importlib.metadata import version; "
    code += "print(json.dumps({'torch': torch.__version__, 'eole': version('eole'), "
    code += "'sentencepiece': s.__version__}))"
    out = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def ensure_eole_venv(venv: Path = VENV) -> Path:
    """Create (once) the Eole venv; return its python."""
    wanted = {"torch": torch_spec(), "eole": EOLE_SPEC, "extra": list(EXTRA_SPECS)}
    fresh = not (venv / ".bench-installed.json").is_file()
    python = ensure_peer_venv(venv, wanted, wanted["torch"], [EOLE_SPEC, *EXTRA_SPECS])
    if fresh:
        print(f"  installed {_installed(python)}", flush=True)
    return python


if __name__ == "__main__":
    print(ensure_eole_venv())
