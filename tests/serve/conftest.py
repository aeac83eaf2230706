"""A tiny random checkpoint, `mtkit serve` as a real process on 127.0.0.1, and a plain client."""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from mtkit.checkpoint import save_checkpoint
from mtkit.config import ModelConfig
from mtkit.data.tokenizer import train_spm
from mtkit.model.transformer import build_model

WORDS = "a man woman dog cat runs sits on the red blue street house ball plays with".split()
# the server's search options, given to `mtkit translate` as well for the expected outputs
FAST = ["--beam", "2", "--max-len-a", "0", "--max-len-b", "4", "--threads", "1"]


def sentences(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 9))) for _ in range(n)]


@pytest.fixture(scope="session")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> str:
    """d_model 16, 1+1 layers, random weights, a 60-piece spm: decodes in milliseconds."""
    spm = train_spm(sentences(300, seed=0), vocab_size=60)
    torch.manual_seed(0)
    cfg = ModelConfig(src_vocab_size=60, tgt_vocab_size=60, d_model=16, ffn_dim=32, heads=2,
                      encoder_layers=1, decoder_layers=1, max_positions=80)  # fmt: skip
    path = tmp_path_factory.mktemp("serve") / "tiny.pt"
    weights = build_model(cfg).state_dict()
    save_checkpoint({"model_config": dataclasses.asdict(cfg), "model": weights,
                     "spm": {"src": spm, "tgt": spm}}, path)  # fmt: skip
    return str(path)


@dataclasses.dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]


class Server:
    """`python -m mtkit serve` on a free port of 127.0.0.1, ready once /health says so."""

    def __init__(self, ckpt: str, log: Path, *options: str, env: dict | None = None) -> None:
        args = [sys.executable, "-m", "mtkit", "serve", "-m", ckpt, "--port", "0",
                "--source-lang", "en", "--target-lang", "de", *FAST, *options]  # fmt: skip
        self.log = log
        env = {**os.environ, **(env or {})}
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=log.open("wb"), env=env)  # fmt: skip
        self.port = self._port()
        deadline = time.monotonic() + 60
        while self.get("/health").status != 200:
            assert time.monotonic() < deadline, self.stderr()
            time.sleep(0.05)

    def _port(self) -> int:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", self.stderr())
            if found:
                return int(found.group(1))
            assert self.proc.poll() is None, self.stderr()
            time.sleep(0.05)
        raise AssertionError(f"no address printed: {self.stderr()}")

    def stderr(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None, timeout: float = 60) -> Reply:  # fmt: skip
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        try:
            parsed = json.loads(data)
        except ValueError:
            parsed = data.decode("utf-8", "replace")
        return Reply(response.status, parsed, {k.lower(): v for k, v in response.getheaders()})

    def get(self, path: str) -> Reply:
        try:
            return self.request("GET", path, timeout=5)
        except OSError:
            return Reply(0, None, {})

    def translate(self, fields: dict[str, Any], headers: dict[str, str] | None = None) -> Reply:
        body = json.dumps({"source": "en", "target": "de", **fields}).encode()
        return self.request("POST", "/translate", body,
                            {"Content-Type": "application/json", **(headers or {})})  # fmt: skip

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(timeout)


@pytest.fixture
def start_server(ckpt: str, tmp_path: Path) -> Iterator[Any]:
    """Start servers with extra options; each is stopped (SIGTERM) after the test."""
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
