"""Running `mtkit train` (or torchrun) in a subprocess, and comparing checkpoints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]


def run_mtkit(args: list[str], env: dict[str, str] | None = None,
              launcher: list[str] | None = None) -> subprocess.CompletedProcess:  # fmt: skip
    """``python -m mtkit ARGS`` (or ``python -m LAUNCHER... -m mtkit ARGS``), one thread each."""
    command = [sys.executable, *(launcher or []), "-m", "mtkit", *args]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(command, cwd=REPO, env=full_env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def tensors(tree: object, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every tensor in a nested dict/list structure, by path."""
    found: dict[str, torch.Tensor] = {}
    if isinstance(tree, torch.Tensor):
        found[prefix] = tree
    elif isinstance(tree, dict):
        for key, value in tree.items():
            found.update(tensors(value, f"{prefix}/{key}"))
    elif isinstance(tree, list | tuple):
        for i, value in enumerate(tree):
            found.update(tensors(value, f"{prefix}/{i}"))
    return found
