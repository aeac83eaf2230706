"""Checkpoint averaging (Vaswani et al., 2017, section 6.1: the last 5 or 20 checkpoints).

Floating-point parameters are averaged in float64 and cast back to their dtype; integer
tensors must agree across checkpoints and are copied. The checkpoints must be of the same
model, vocabularies and languages; the output keeps the first one's fields (configs,
tokenizers, language codes, tags) and drops the training state, so it is an inference
checkpoint (and not a point to resume training from).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

import torch

from mtkit.checkpoint import Checkpoint
from mtkit.errors import MtkitError


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


def average_checkpoints(paths: Sequence[str | Path], output: str | Path) -> Checkpoint:
    """Average the models of ``paths`` into a new checkpoint at ``output`` (written atomically)."""
    if not paths:
        raise MtkitError("no checkpoints to average")
    first = Checkpoint.load(paths[0])
    states = [first.model]
    for path in paths[1:]:
        ckpt = Checkpoint.load(path)
        if ckpt.model_config != first.model_config:
            mine, theirs = asdict(first.model_config), asdict(ckpt.model_config)
            diff = sorted(k for k in mine if theirs[k] != mine[k])
            raise MtkitError(
                f"{path}: model config differs from {paths[0]} ({', '.join(diff)}); "
                "only checkpoints of the same model can be averaged"
            )
        for name in ("vocab", "special_ids"):
            if getattr(ckpt, name) != getattr(first, name):
                raise MtkitError(f"{path}: its {name} differs from {paths[0]}'s")
        if ckpt.languages != first.languages:
            raise MtkitError(
                f"{path}: languages {_pair(ckpt)} differ from {paths[0]}'s ({_pair(first)}); "
                "only models of the same languages can be averaged"
            )
        if ckpt.model.keys() != first.model.keys():
            raise MtkitError(f"{path}: parameters differ from {paths[0]}")
        states.append(ckpt.model)
    averaged = replace(
        first, model=average_state_dicts(states), resume=None, averaged_from=[str(p) for p in paths]
    )
    averaged.save(output)
    return averaged


def _pair(ckpt: Checkpoint) -> str:
    return "-".join(ckpt.languages.pair) if ckpt.languages else "none named"
