"""A separate virtual environment holding the peer engines bench_engines.py compares against.

``ensure_venv()`` creates ``.bench/venv-engines`` once and returns its python: torch of this
interpreter's version first (so pip takes the local CPU wheel; extra pip arguments for it from
``TORCH_PIP_ARGS``), then transformers, ctranslate2, sentencepiece and sacrebleu of the versions
installed here. A stamp file records what it holds; a file lock makes it safe to call twice.
"""

from __future__ import annotations

import sys
from pathlib import Path

from peer_venv import ensure_peer_venv

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
    wanted = installed_versions()
    return ensure_peer_venv(
        VENV,
        wanted,
        f"torch=={wanted['torch']}",
        [f"{name}=={wanted[name]}" for name in PEER_PACKAGES],
    )
