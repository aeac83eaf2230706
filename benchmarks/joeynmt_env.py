"""A separate virtual environment holding JoeyNMT 2.3.0, the peer the benchmarks compare against.

``ensure_joeynmt_venv()`` creates ``.bench/venv-joeynmt`` when it is missing and returns its
python. It is idempotent (a stamp file records what was installed) and safe to call from two
benchmarks at once (a file lock). Install order matters on a CPU-only machine: torch first, the
same version as the interpreter running the benchmark, so that JoeyNMT's loose ``torch>=1.12``
requirement is already met and pip never pulls a CUDA build. Extra pip arguments for torch (an
index holding CPU wheels, say) come from the ``TORCH_PIP_ARGS`` environment variable, which
``make bench`` sets from the Makefile's own TORCH_PIP_ARGS.

JoeyNMT 2.3.0 also needs ``importlib_metadata`` and ``sentencepiece==0.2.0`` beside it.
"""

from __future__ import annotations

from pathlib import Path

from peer_venv import ensure_tool_venv
from peer_venv import venv_python as peer_python

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / ".bench"
VENV = BENCH_DIR / "venv-joeynmt"
JOEYNMT_SPEC = "joeynmt==2.3.0"
EXTRA_SPECS = ("importlib_metadata", "sentencepiece==0.2.0")


def venv_python(venv: Path = VENV) -> Path:
    return peer_python(venv)


def ensure_joeynmt_venv(venv: Path = VENV) -> Path:
    """Create (once) the JoeyNMT venv; return its python."""
    return ensure_tool_venv(venv, "joeynmt", JOEYNMT_SPEC, EXTRA_SPECS)


if __name__ == "__main__":
    print(ensure_joeynmt_venv())
