"""Exports of mtkit checkpoints to other engines: Hugging Face transformers, CTranslate2 and
Argos Translate.

``hf.export_hf`` writes a MarianMTModel directory (weights, config, tokenizer, generation
defaults); ``ct2.export_ct2`` writes a CTranslate2 model directory with the sentencepiece models
beside it, and ``ct2.translate_lines_ct2`` decodes with it; ``argos.export_argos`` packages the
same CTranslate2 model as a ``.argosmodel``. The peer libraries are optional extras, imported
only inside the functions that need them.
"""

from __future__ import annotations

import dataclasses

from mtkit.config import ModelConfig
from mtkit.errors import MtkitError
from mtkit.extras import require
from mtkit.staging import staged_dir

__all__ = ["ANY", "GENERAL", "check_supported", "require", "staged_dir"]

ANY = None  # every value of the field can be written
# ModelConfig fields every exporter writes whatever their values (each may refuse some values
# itself, e.g. Marian's post-LN only)
GENERAL: dict[str, frozenset | None] = dict.fromkeys(
    (
        "src_vocab_size",
        "tgt_vocab_size",
        "d_model",
        "ffn_dim",
        "heads",
        "encoder_layers",
        "decoder_layers",
        "dropout",
        "attention_dropout",
        "activation_dropout",
        "pre_norm",
        "tie_output",
        "share_all_embeddings",
        "max_positions",
    ),
    ANY,
)


def check_supported(
    cfg: ModelConfig, target: str, supports: dict[str, frozenset | None], why: dict[str, str]
) -> None:
    """Refuse a model the exporter cannot write, in one line naming the field (a whitelist).

    ``supports`` maps each ModelConfig field the exporter writes to the values it can write
    (``ANY``: all); every other field must keep its default, which is what the exporter's weight
    layout assumes, so a field added to ModelConfig is refused until an exporter learns it.
    ``why`` gives a reason per field, for the message.
    """
    defaults = ModelConfig()
    for field in dataclasses.fields(ModelConfig):
        name, value = field.name, getattr(cfg, field.name)
        if name == "kv_heads" and value == cfg.heads:  # the default model: kv_heads 0 means heads
            value = 0
        allowed = supports.get(name, frozenset({getattr(defaults, name)}))
        if allowed is ANY or value in allowed:
            continue
        can = ", ".join(repr(v) for v in sorted(allowed, key=str))
        reason = f": {why[name]}" if name in why else ""
        raise MtkitError(
            f"model.{name}={getattr(cfg, name)!r} cannot be exported to {target} "
            f"(it writes {can}){reason}; translate with mtkit's own engine"
        )
