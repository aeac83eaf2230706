"""Fixtures of the serve tests: a tiny random checkpoint, and servers started per test."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from serve_helpers import Server, sentences

from mtkit.checkpoint import save_checkpoint
from mtkit.config import ModelConfig
from mtkit.data.tokenizer import train_spm
from mtkit.model.transformer import build_model


@pytest.fixture(scope="session")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> str:
    """d_model 16, 1+1 layers, random weights, a 60-piece spm: decodes in milliseconds."""
    spm = train_spm(sentences(300, seed=0), vocab_size=60)
    torch.manual_seed(0)
    cfg = ModelConfig(
        src_vocab_size=60,
        tgt_vocab_size=60,
        d_model=16,
        ffn_dim=32,
        heads=2,
        encoder_layers=1,
        decoder_layers=1,
        max_positions=80,
    )
    path = tmp_path_factory.mktemp("serve") / "tiny.pt"
    weights = build_model(cfg).state_dict()
    save_checkpoint(
        {
            "model_config": dataclasses.asdict(cfg),
            "model": weights,
            "spm": {"src": spm, "tgt": spm},
        },
        path,
    )
    return str(path)


@pytest.fixture
def start_server(ckpt: str, tmp_path: Path) -> Iterator[Any]:
    """Start servers with extra options; any still running after the test is killed."""
    started: list[Server] = []

    def start(*options: str, env: dict | None = None) -> Server:
        server = Server(ckpt, tmp_path / f"server{len(started)}.log", *options, env=env)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(10)
