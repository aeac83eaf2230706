"""Fixtures of the serve tests: a tiny random checkpoint, and servers started per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import Server, random_checkpoint


@pytest.fixture(scope="session")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> str:
    """d_model 16, 1+1 layers, random weights, a 60-piece spm: decodes in milliseconds."""
    return random_checkpoint(tmp_path_factory.mktemp("serve") / "tiny.pt")


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
