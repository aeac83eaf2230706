"""Checkpoint averaging (Vaswani et al., 2017, section 6.1: the last 5 or 20 checkpoints).

Floating-point parameters are averaged in float64 and cast back to their dtype; integer
tensors must agree across checkpoints and are copied. The output keeps ``model_config``,
``train_config``, ``spm`` (and an imported ``vocab`` with its ``special_ids``) of the first
checkpoint and drops the optimizer and other training
state, so it is an inference checkpoint (and not a point to resume training from).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from mtkit.checkpoint import load_checkpoint, save_checkpoint
from mtkit.errors import MtkitError

VOCAB_FIELDS = ("vocab", "special_ids")  # an imported vocabulary (mtkit.checkpoint)


def average_state_dicts(states: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Element-wise mean of state dicts with the same keys and shapes.

    >>> average_state_dicts([{"w": torch.tensor([1.0])}, {"w": torch.tensor([2.0])}])["w"]
    tensor([1.5000])
    """
    first = states[0]
    out = {}
    for name, tensor in first.items():
        if tensor.is_floating_point():
            total = torch.zeros_like(tensor, dtype=torch.float64)
            for state in states:
                total += state[name].to(torch.float64)
            out[name] = (total / len(states)).to(tensor.dtype)
        else:
            if any(not torch.equal(state[name], tensor) for state in states[1:]):
                raise MtkitError(f"checkpoints disagree on the integer tensor '{name}'")
            out[name] = tensor.clone()
    return out


def average_checkpoints(paths: Sequence[str | Path], output: str | Path) -> dict[str, Any]:
    """Average the models of ``paths`` into a new checkpoint at ``output`` (written atomically)."""
    if not paths:
        raise MtkitError("no checkpoints to average")
    first = load_checkpoint(paths[0])
    states = [first["model"]]
    for path in paths[1:]:
        ckpt = load_checkpoint(path)
        if ckpt["model_config"] != first["model_config"]:
            diff = sorted(k for k in first["model_config"]
                          if ckpt["model_config"].get(k) != first["model_config"][k])  # fmt: skip
            raise MtkitError(
                f"{path}: model config differs from {paths[0]} ({', '.join(diff)}); "
                "only checkpoints of the same model can be averaged"
            )
        for key in VOCAB_FIELDS:
            if ckpt.get(key) != first.get(key):
                raise MtkitError(f"{path}: its {key} differs from {paths[0]}'s")
        if ckpt["model"].keys() != first["model"].keys():
            raise MtkitError(f"{path}: parameters differ from {paths[0]}")
        states.append(ckpt["model"])
    payload = {
        "model_config": first["model_config"],
        "train_config": first.get("train_config", {}),
        "spm": first["spm"],
        **{key: first[key] for key in VOCAB_FIELDS if key in first},
        "model": average_state_dicts(states),
        "averaged_from": [str(p) for p in paths],
    }
    save_checkpoint(payload, output)
    return payload
