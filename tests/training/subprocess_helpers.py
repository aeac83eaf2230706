"""Running `mtkit train` (or torchrun) in a subprocess, and comparing checkpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[2]
SLOW_MTKIT = Path(__file__).with_name("slow_mtkit.py")


def run_mtkit(
    args: list[str],
    env: dict[str, str] | None = None,
    launcher: list[str] | None = None,
    slow: bool = False,
) -> subprocess.CompletedProcess:
    """``python -m mtkit ARGS`` (or ``python -m LAUNCHER... -m mtkit ARGS``; ``slow``: the test
    wrapper slow_mtkit.py, whose MTKIT_TEST_* variables go in ``env``), one thread each."""
    mtkit = [str(SLOW_MTKIT)] if slow else ["-m", "mtkit"]
    command = [sys.executable, *(launcher or []), *mtkit, *args]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(
        command, cwd=REPO, env=full_env, capture_output=True, text=True, timeout=300
    )


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


TIMINGS = frozenset({"elapsed", "tgt_tokens_per_s"})


def assert_same_tree(a: object, b: object, path: str = "", skip: frozenset = TIMINGS) -> None:
    """Nested checkpoint data equal: tensors bitwise, everything else by ==, keys in ``skip``
    (at any depth) ignored."""
    assert type(a) is type(b), path
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path  # type: ignore[attr-defined]
        for key in a:
            if key not in skip:
                assert_same_tree(a[key], b[key], f"{path}/{key}", skip)  # type: ignore[index]
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path  # type: ignore[arg-type]
        for i, (x, y) in enumerate(zip(a, b, strict=True)):  # type: ignore[call-overload]
            assert_same_tree(x, y, f"{path}/{i}", skip)
    else:
        assert a == b, (path, a, b)


def assert_same_run_dir(expected: Path, actual: Path, changed: frozenset = frozenset()) -> None:
    """Two run directories hold the same files with the same content, timings aside: every
    checkpoint (tensors bitwise; training state, history and configs equal, the ``changed``
    keys of the train config aside), config.yaml and the metrics log."""
    from mtkit.checkpoint import load_checkpoint

    names = sorted(p.name for p in expected.iterdir() if p.name != "tensorboard")
    assert names == sorted(p.name for p in actual.iterdir() if p.name != "tensorboard")
    for name in names:
        if name.endswith(".pt"):
            a, b = load_checkpoint(expected / name), load_checkpoint(actual / name)
            assert_same_tree(a, b, name, TIMINGS | changed)
    configs = [yaml.safe_load((d / "config.yaml").read_text()) for d in (expected, actual)]
    assert_same_tree(*configs, "config.yaml", changed)
    assert train_records(expected) == train_records(actual)
