"""What the checkpoint tests share: a small sentencepiece model and a checkpoint payload."""

from dataclasses import asdict

import torch

from mtkit.config import ModelConfig
from mtkit.data.tokenizer import train_spm
from mtkit.model.transformer import build_model

WORDS = "the a man woman dog cat runs walks on in red blue big small house street".split()


def spm_model() -> bytes:
    lines = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(6)) for i in range(200)]
    return train_spm(lines, vocab_size=60)


def make_ckpt(spm_bytes: bytes) -> tuple[dict, torch.nn.Module]:
    cfg = ModelConfig(
        src_vocab_size=60,
        tgt_vocab_size=60,
        d_model=16,
        ffn_dim=32,
        heads=2,
        encoder_layers=1,
        decoder_layers=1,
    )
    model = build_model(cfg)
    payload = {
        "model_config": asdict(cfg),
        "model": model.state_dict(),
        "spm": {"src": spm_bytes, "tgt": spm_bytes},
    }
    return payload, model
