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

from pathlib import Path

from joeynmt_env import BENCH_DIR
from peer_venv import ensure_tool_venv
from peer_venv import venv_python as peer_python

VENV = BENCH_DIR / "venv-eole"
EOLE_SPEC = "eole==0.6.4"
EXTRA_SPECS = ("aiohttp",)


def venv_python(venv: Path = VENV) -> Path:
    return peer_python(venv)


def ensure_eole_venv(venv: Path = VENV) -> Path:
    """Create (once) the Eole venv; return its python."""
    return ensure_tool_venv(venv, "eole", EOLE_SPEC, EXTRA_SPECS)


if __name__ == "__main__":
    print(ensure_eole_venv())
