"""Random-weight checkpoints, for tests that need a model but not a trained one."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import torch

from mtkit.checkpoint import save_checkpoint
from mtkit.config import ModelConfig
from mtkit.data.tokenizer import train_spm
from mtkit.model.transformer import build_model

TINY = dict(d_model=16, ffn_dim=32, heads=2, encoder_layers=1, decoder_layers=1, max_positions=80)


def random_checkpoint(path: Path, text: Sequence[str], **sizes: int) -> str:
    """A Transformer of :data:`TINY`'s sizes (``sizes`` instead), random weights of seed 0,
    and a 60-piece spm trained on ``text`` for both sides, saved at ``path``."""
    spm = train_spm(text, vocab_size=60)
    torch.manual_seed(0)
    cfg = ModelConfig(src_vocab_size=60, tgt_vocab_size=60, **{**TINY, **sizes})
    save_checkpoint(
        {
            "model_config": dataclasses.asdict(cfg),
            "model": build_model(cfg).state_dict(),
            "spm": {"src": spm, "tgt": spm},
        },
        path,
    )
    return str(path)
