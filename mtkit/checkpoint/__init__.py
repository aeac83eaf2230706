"""Checkpoints: one type, :class:`Checkpoint`, owns what the file holds (:mod:`.schema`); the
file itself is plain data written atomically and loaded with ``torch.load(weights_only=True)``
(:mod:`.storage`), so `mtkit translate -m CKPT` needs nothing else and loading never unpickles
code.
"""

from mtkit.checkpoint.inference import LoadedModel, load_for_inference
from mtkit.checkpoint.schema import Checkpoint, ResumeState, vocabularies
from mtkit.checkpoint.storage import (
    CHECKPOINT_VERSION,
    FORMAT,
    load_checkpoint,
    save_checkpoint,
    unpickling_problem,
)

__all__ = [
    "CHECKPOINT_VERSION",
    "FORMAT",
    "Checkpoint",
    "LoadedModel",
    "ResumeState",
    "load_checkpoint",
    "load_for_inference",
    "save_checkpoint",
    "unpickling_problem",
    "vocabularies",
]
