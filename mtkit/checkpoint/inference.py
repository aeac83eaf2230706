"""A checkpoint's model and tokenizers, ready to translate with."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from mtkit.checkpoint.schema import Checkpoint
from mtkit.config import ModelConfig
from mtkit.data.sentence_style import SentenceStyle
from mtkit.data.source_words import SourceWords
from mtkit.data.tokenizer import Tokenizer
from mtkit.languages import Languages
from mtkit.model.transformer import Transformer


@dataclass
class LoadedModel:
    """A model ready for inference with the tokenizers it was trained with."""

    model: Transformer
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    config: ModelConfig
    checkpoint_path: str
    languages: Languages | None = None  # None: the checkpoint names none (Checkpoint.languages)
    source_pieces: int | None = None  # the longest training source (Checkpoint.source_pieces)
    sentence_style: SentenceStyle = field(default_factory=SentenceStyle)  # Checkpoint's
    source_words: SourceWords = field(default_factory=SourceWords)  # Checkpoint's


def load_for_inference(path: str | Path, device: str | torch.device = "cpu") -> LoadedModel:
    """Load a checkpoint's model (in eval mode, on ``device``) and its tokenizers."""
    ckpt = Checkpoint.load(path)
    model = ckpt.build_model().to(device).eval()
    src, tgt = ckpt.tokenizers()
    return LoadedModel(
        model=model,
        src_tokenizer=src,
        tgt_tokenizer=tgt,
        config=model.cfg,
        checkpoint_path=str(path),
        languages=ckpt.languages,
        source_pieces=ckpt.source_pieces,
        sentence_style=ckpt.sentence_style,
        source_words=ckpt.source_words,
    )
