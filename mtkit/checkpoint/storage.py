"""The checkpoint file: a dict of tensors and plain containers, written whole or not at all and
read with ``torch.load(weights_only=True)``, so loading never unpickles code. What the dict
holds is :class:`mtkit.checkpoint.Checkpoint`'s business; this module checks only the envelope
(``format``, ``format_version``, ``mtkit_version``) and the keys every checkpoint has.
"""

from __future__ import annotations

import pickle
import re
import warnings
from pathlib import Path
from typing import Any

import torch

from mtkit import __version__
from mtkit.errors import MtkitError
from mtkit.staging import staged_file

FORMAT = "mtkit-checkpoint"
CHECKPOINT_VERSION = 1
REQUIRED = ("model_config", "model", "spm")


def save_checkpoint(payload: dict[str, Any], path: str | Path) -> None:
    """Write ``payload`` whole or not at all (:func:`mtkit.staging.staged_file`)."""
    payload = {
        "format": FORMAT,
        "format_version": CHECKPOINT_VERSION,
        "mtkit_version": __version__,
        **payload,
    }
    try:
        with staged_file(path) as handle:
            torch.save(payload, handle)
    except OSError as err:
        raise MtkitError(f"{path}: could not write checkpoint ({err.strerror or err})") from None


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load and validate a checkpoint without executing any code from it."""
    path = Path(path)
    if not path.exists():
        raise MtkitError(f"{path}: no such checkpoint")
    if path.is_dir():
        raise MtkitError(f"{path}: is a directory, not a checkpoint")
    if path.stat().st_size == 0:
        raise MtkitError(f"{path}: empty file, not a checkpoint")
    try:
        with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": we explain below
            warnings.simplefilter("ignore")
            ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        raise MtkitError(f"{path}: {unpickling_problem(str(err))}") from None
    except Exception as err:  # torch raises many types for truncated or foreign files
        raise MtkitError(
            f"{path}: unreadable checkpoint (truncated or corrupt: {first_sentence(err)})"
        ) from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise MtkitError(f"{path}: not an mtkit checkpoint")
    if ckpt.get("format_version") != CHECKPOINT_VERSION:
        raise MtkitError(
            f"{path}: checkpoint format {ckpt.get('format_version')!r} (mtkit "
            f"{ckpt.get('mtkit_version', '?')}); this mtkit {__version__} reads "
            f"format {CHECKPOINT_VERSION}"
        )
    for key in REQUIRED:
        if key not in ckpt:
            raise MtkitError(f"{path}: checkpoint lacks '{key}'")
    return ckpt


def unpickling_problem(text: str) -> str:
    """What ``torch.load(weights_only=True)`` refused, in a few words."""
    called = re.search(r"GLOBAL ([\w.]+)", text)
    if called:  # a pickle that imports something: exactly what a crafted file does to run code
        return (
            f"refused: loading it would call {called.group(1)} (a checkpoint holds only tensors "
            "and plain data; not an mtkit checkpoint, or crafted to run code)"
        )
    detail = re.search(r"WeightsUnpickler error:\s*(.+)", text)
    reason = detail.group(1).strip() if detail else "unsupported pickle content"
    return f"refused: not a checkpoint of tensors and plain data ({reason})"


def first_sentence(err: Exception) -> str:
    """The first line (and sentence) of a library's error, or its type when it has no text."""
    text = str(err).strip()
    if not text:
        return type(err).__name__
    return text.splitlines()[0].split(". ")[0].rstrip(".")
