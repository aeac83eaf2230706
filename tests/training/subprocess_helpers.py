"""Running `mtkit train` (or torchrun) in a subprocess, and comparing checkpoints."""

from __future__ import annotations

import json
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


def train_records(run_dir: Path) -> list[dict]:
    """The run's metrics.jsonl records without their timings."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    timing = ("elapsed", "tgt_tokens_per_s")
    return [{k: v for k, v in json.loads(line).items() if k not in timing} for line in lines]


def without_time(state: dict) -> dict:
    """A checkpoint's training state without wall-clock times."""
    history = [{k: v for k, v in r.items() if k != "elapsed"} for r in state["history"]]
    return {**state, "elapsed": None, "history": history}


def assert_same_run(expected: Path, actual: Path) -> tuple[dict, dict]:
    """checkpoint_last.pt of both runs: bitwise equal model, optimizer and RNG tensors, equal
    schedule, training state and metrics log. Returns both checkpoints."""
    from mtkit.checkpoint import load_checkpoint

    a = load_checkpoint(expected / "checkpoint_last.pt")
    b = load_checkpoint(actual / "checkpoint_last.pt")
    assert a["update"] == b["update"]
    ta = tensors({k: a[k] for k in ("model", "optimizer", "rng")})
    tb = tensors({k: b[k] for k in ("model", "optimizer", "rng")})
    assert ta.keys() == tb.keys() and len(ta) > 20
    for name in ta:
        assert torch.equal(ta[name], tb[name]), name
    assert a["scheduler"] == b["scheduler"]
    assert without_time(a["state"]) == without_time(b["state"])
    assert train_records(expected) == train_records(actual)  # each update logged once
    return a, b
