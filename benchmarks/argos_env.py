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

import sys
from pathlib import Path

from peer_venv import ensure_peer_venv
from peer_venv import venv_python as peer_python

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
    return peer_python(venv)


def ensure_argos_venv(venv: Path = VENV) -> Path:
    """Create (once) the Argos Translate venv; return its python."""
    specs = pinned_specs()
    wanted = {"argostranslate": ARGOS_SPEC, **specs}
    return ensure_peer_venv(venv, wanted, specs["torch"], [ARGOS_SPEC, *specs.values()])


if __name__ == "__main__":
    print(ensure_argos_venv())
