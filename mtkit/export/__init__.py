"""Exports of mtkit checkpoints to other engines: Hugging Face transformers and CTranslate2.

``hf.export_hf`` writes a MarianMTModel directory (weights, config, tokenizer, generation
defaults); ``ct2.export_ct2`` writes a CTranslate2 model directory with the sentencepiece models
beside it, and ``ct2.translate_lines_ct2`` decodes with it. The peer libraries are optional extras,
imported only inside the functions that need them.
"""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType

from mtkit.config import ModelConfig
from mtkit.errors import MtkitError
from mtkit.staging import staged_dir

__all__ = ["check_exportable", "require", "staged_dir"]

# ModelConfig fields whose values both exporters write (each exporter refuses some values itself,
# e.g. Marian's post-LN only); every other field must keep its default, which is what the
# exporters' weight layout and numerics assume. A field added to ModelConfig is refused until an
# exporter learns it.
EXPORTED_FIELDS = frozenset({
    "src_vocab_size", "tgt_vocab_size", "d_model", "ffn_dim", "heads", "encoder_layers",
    "decoder_layers", "dropout", "attention_dropout", "activation_dropout", "pre_norm",
    "tie_output", "share_all_embeddings", "max_positions",
})  # fmt: skip


def check_exportable(cfg: ModelConfig, target: str) -> None:
    """Refuse a model variant the exporters do not write yet, naming its field."""
    defaults = ModelConfig()
    for field in dataclasses.fields(ModelConfig):
        name, value = field.name, getattr(cfg, field.name)
        if name in EXPORTED_FIELDS or value == getattr(defaults, name):
            continue
        if name == "kv_heads" and value == cfg.heads:  # the same model as kv_heads=0
            continue
        raise MtkitError(
            f"model.{name}={value!r} cannot be exported to {target} yet (only the default "
            f"{getattr(defaults, name)!r}); translate with mtkit's own engine"
        )


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import an optional dependency, or fail naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MtkitError(
            f"{what} needs the '{extra}' extra ({err.name or module} is not installed): "
            f"pip install 'mtkit[{extra}]'"
        ) from None
