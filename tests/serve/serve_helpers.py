"""Helpers of the serve tests: sentences, random checkpoints, `mtkit serve` as a real process
on 127.0.0.1 with a plain client, and `mtkit translate`'s outputs to compare with."""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from random_models import random_checkpoint as random_model

from mtkit.cli import cli
from mtkit.config import SearchConfig, TranslateConfig
from mtkit.engines.base import Translation
from mtkit.serve.batcher import Batcher

WORDS = "a man woman dog cat runs sits on the red blue street house ball plays with".split()
# the server's search options, given to `mtkit translate` as well for the expected outputs
# translate's path (fp32, eager), which the servers' answers are compared with
FAST = ["--beam", "2", "--max-len-a", "0", "--max-len-b", "4", "--threads", "1"]
FAST += ["--dtype", "fp32", "--compile", "off"]


def sentences(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 9))) for _ in range(n)]


@dataclasses.dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]


class Server:
    """`python -m mtkit serve` on a free port of 127.0.0.1, ready once /health says so."""

    def __init__(self, ckpt: str, log: Path, *options: str, env: dict | None = None) -> None:
        args = [
            sys.executable,
            "-m",
            "mtkit",
            "serve",
            "-m",
            ckpt,
            "--port",
            "0",
            "--source-lang",
            "en",
            "--target-lang",
            "de",
            *FAST,
            *options,
        ]
        self.log = log
        env = {**os.environ, **(env or {})}
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log.open("wb"),
            env=env,
        )
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

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> Reply:
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
        return self.request(
            "POST", "/translate", body, {"Content-Type": "application/json", **(headers or {})}
        )

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(timeout)


def multipart(
    *parts: tuple[str, str | bytes] | tuple[str, str, bytes], boundary: str = "b0und"
) -> bytes:
    """A multipart/form-data body of (name, value) fields and (name, filename, data) files."""
    out = b""
    for part in parts:
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{part[0]}"'.encode()
        if len(part) == 3:
            out += f'; filename="{part[1]}"\r\nContent-Type: text/plain'.encode()
        value = part[-1]
        out += b"\r\n\r\n" + (value.encode() if isinstance(value, str) else value) + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


@cache
def translated(ckpt: str, lines: tuple[str, ...], *options: str) -> tuple[tuple[str, ...], ...]:
    """`mtkit translate` of ``lines`` with FAST and ``options``: per line, its n-best texts."""
    result = CliRunner().invoke(
        cli,
        ["translate", "-m", ckpt, *FAST, *options, "-q"],
        input="".join(line + "\n" for line in lines),
    )
    assert result.exit_code == 0, result.output
    if "--nbest" not in options:
        return tuple((text,) for text in result.stdout.split("\n")[:-1])
    hyps: list[list[str]] = [[] for _ in lines]
    for row in result.stdout.splitlines():
        number, _, _, _, text = row.split("\t")
        hyps[int(number) - 1].append(text)
    return tuple(map(tuple, hyps))


def best(ckpt: str, lines: list[str], *options: str) -> list[str]:
    return [hyps[0] for hyps in translated(ckpt, tuple(lines), *options)]


class FakeEngine:
    """Upper-cases each line; 'boom' in a call fails it; 'gate' blocks until released."""

    def __init__(self) -> None:
        self.config = TranslateConfig()
        self.calls: list[tuple[list[str], SearchConfig]] = []
        self.release = threading.Event()
        self.entered = threading.Event()

    def check(self, search: SearchConfig) -> None:
        pass

    def translate(
        self, lines: Sequence[str], search: SearchConfig | None = None, *args: object
    ) -> list[list[Translation]]:
        self.calls.append((list(lines), search))
        if "gate" in lines:
            self.entered.set()
            assert self.release.wait(5)
        if "boom" in lines:
            raise RuntimeError("boom")
        return [
            [Translation(line.upper(), 0.0, 0.0, len(line.split()))] if line.strip() else []
            for line in lines
        ]


def started(engine: FakeEngine, **kwargs) -> Batcher:
    options = dict(max_tokens=10, max_wait=0.05, queue_size=100) | kwargs
    return Batcher(engine, **options).start()  # type: ignore[arg-type]


def texts(job) -> list[str]:
    return [hyps[0].text if hyps else "" for hyps in job.future.result(timeout=5)]


def hold(engine: FakeEngine, batcher: Batcher):
    """Keep the worker busy on a 'gate' job, so that the next jobs queue up together."""
    job = batcher.submit(["gate"], SearchConfig())
    assert engine.entered.wait(5)
    return job


def random_checkpoint(path: Path, **sizes: int) -> str:
    """The serve tests' random model at ``path`` (tests/random_models.py), ``sizes`` over the
    tiny one's."""
    return random_model(path, sentences(300, seed=0), **sizes)
