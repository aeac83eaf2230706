"""Exports of mtkit checkpoints to other engines: Hugging Face transformers and CTranslate2.

``hf.export_hf`` writes a MarianMTModel directory (weights, config, tokenizer, generation
defaults); ``ct2.export_ct2`` writes a CTranslate2 model directory with the sentencepiece models
beside it, and ``ct2.translate_lines_ct2`` decodes with it. The peer libraries are optional extras,
imported only inside the functions that need them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from mtkit.errors import MtkitError
from mtkit.staging import staged_dir

__all__ = ["require", "staged_dir"]


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import an optional dependency, or fail naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MtkitError(
            f"{what} needs the '{extra}' extra ({err.name or module} is not installed): "
            f"pip install 'mtkit[{extra}]'"
        ) from None
