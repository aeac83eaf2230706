"""What every route of `mtkit serve` shares: the loaded model, the service that holds it, and
the checks on a request before its fields are read (body size, API key)."""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from mtkit.config import SearchConfig, ServeConfig
from mtkit.engines.base import Engine
from mtkit.serve.batcher import Batcher
from mtkit.serve.dispatcher import Dispatcher
from mtkit.serve.errors import ApiError
from mtkit.text.glossary import Glossary


@dataclass
class Model:
    """A loaded model, its language pair, its default search and its batcher."""

    engine: Engine
    pair: tuple[str, str]
    batcher: Batcher | Dispatcher
    search: SearchConfig
    name: str = ""
    glossary: Glossary | None = None  # --glossary: terms every request's sentences keep


@dataclass
class Service:
    """What the app serves: ``model`` is None while loading (and after a failed load)."""

    config: ServeConfig
    model: Model | None = None
    error: str = ""  # why loading failed
    started: float = field(default_factory=time.monotonic)

    def ready(self) -> Model:
        if self.model is None:
            why = f"the model failed to load: {self.error}" if self.error else "loading the model"
            raise ApiError(503, "model", why, {"Retry-After": "1"})
        return self.model


def token_counter(engine: Engine) -> Callable[[Sequence[str]], int]:
    """Source pieces + EOS of some lines, with the engine's source tokenizer and its cut
    (:attr:`~mtkit.engines.base.Engine.max_source_pieces`): what a batch of them costs."""
    tokenizer, cap = engine.src_tokenizer, engine.max_source_pieces
    return lambda lines: sum(min(len(ids), cap) + 1 for ids in tokenizer.encode(list(lines)))


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it exceeds ``limit`` bytes."""
    too_big = ApiError(413, "body", f"larger than the limit of {limit} bytes (--max-body-bytes)")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise too_big
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


def check_key(config: ServeConfig, request: Request, data: dict[str, Any] | None) -> None:
    """With --api-key: the key from ``Authorization: Bearer``, ``X-API-Key`` or ``api_key``."""
    if not config.api_key:
        return
    given = request.headers.get("x-api-key") or ""
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        given = auth[7:].strip()
    if not given and data is not None and isinstance(data.get("api_key"), str):
        given = data["api_key"]
    if not given:
        raise ApiError(
            401,
            "api_key",
            "this server needs an API key (api_key, or the header 'Authorization: Bearer KEY')",
        )
    if not hmac.compare_digest(given.encode("utf-8", "replace"), config.api_key.encode()):
        raise ApiError(403, "api_key", "invalid API key")


def error_response(err: ApiError) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status, headers=err.headers)


def key_in_headers(request: Request) -> bool:
    """Whether the client sent a key in a header (else it may come in the body)."""
    return bool(request.headers.get("x-api-key") or request.headers.get("authorization"))
