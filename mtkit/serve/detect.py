"""LibreTranslate's ``POST /detect`` and ``GET /frontend/settings``, over a :class:`Service`.

``POST /detect`` takes ``{"q": "text", "api_key": "..."}`` (JSON or an HTML form, the API key as
for ``/translate``) and answers the languages the text may be in, best first, as LibreTranslate
does: at most three ``{"confidence": 0-100, "language": "en"}``, from every language the
identifier knows (:func:`mtkit.text.langid.identify`, 139 of them), not only the model's. A text
with no letter outside URLs, numbers, emoji, ... answers the model's source language with
confidence 0, as LibreTranslate answers English with 0.

``GET /frontend/settings`` describes the server to LibreTranslate's web page and to clients
that read it: ``charLimit`` (``--max-chars``), ``frontendTimeout`` (LibreTranslate's default
500: the page's wait in milliseconds after a keystroke before it translates), ``apiKeys`` and
``keyRequired`` (both true when the server has an API key), no suggestions and no file
translation, and the model's source language and first target language, each
``{"code", "name"}``.

Both answer 503 while the model loads, as ``/translate`` and ``/languages`` do. The
identifier's model (0.5-0.8 s to load) is loaded in a background thread when the routes are
made, so that the first ``"source": "auto"`` request need not wait for it.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from mtkit.config import ServeConfig
from mtkit.serve.bodies import decode_body
from mtkit.serve.errors import ApiError
from mtkit.serve.fields import kind_of
from mtkit.serve.languages import language_name
from mtkit.serve.service import (
    Service,
    check_key,
    error_response,
    key_in_headers,
    read_body,
)
from mtkit.text import langid

DETECTIONS = 3  # languages /detect answers at most, as LibreTranslate
FRONTEND_TIMEOUT_MS = 500  # LibreTranslate's default --frontend-timeout

DETECT_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["q"],
                "properties": {
                    "q": {"type": "string", "description": "Text to detect"},
                    "api_key": {"type": "string"},
                },
            },
            "example": {"q": "What language is this?"},
        }
    },
}


def router(service: Service) -> APIRouter:
    """The routes /detect and /frontend/settings; starts loading the identifier."""
    threading.Thread(target=langid.load, name="mtkit-langid", daemon=True).start()
    routes = APIRouter()
    config = service.config

    @routes.post("/detect", openapi_extra={"requestBody": DETECT_BODY})
    async def detect(request: Request) -> JSONResponse:
        """The languages a text may be in, best first (LibreTranslate's API)."""
        try:
            if key_in_headers(request):  # refuse a wrong key before reading the body
                check_key(config, request, None)
            model = service.ready()
            data = decode_body(
                await read_body(request, config.max_body_bytes),
                request.headers.get("content-type", ""),
            )
            check_key(config, request, data)
            text = detect_text(data, config)
        except ApiError as err:
            return error_response(err)
        source = model.pair[0].split(",")[0]
        return JSONResponse(await asyncio.to_thread(detections, text, source))

    @routes.get("/frontend/settings")
    async def frontend() -> JSONResponse:
        """What LibreTranslate's web page reads first: limits, the API key, the languages."""
        try:
            pair = service.ready().pair
        except ApiError as err:
            return error_response(err)
        return JSONResponse(frontend_settings(config, pair))

    return routes


def detect_text(data: dict[str, Any], config: ServeConfig) -> str:
    """The text of a /detect request, checked."""
    if "q" not in data:
        raise ApiError(400, "q", "missing (the text to detect)")
    q = data["q"]
    if not isinstance(q, str):
        raise ApiError(400, "q", f"must be a string, got {kind_of(q)}")
    if len(q) > config.max_chars:
        raise ApiError(400, "q", f"{len(q)} characters, more than the limit of {config.max_chars}")
    return q


def detections(text: str, source: str) -> list[dict[str, Any]]:
    """At most :data:`DETECTIONS` languages of ``text``, best first; ``source`` with
    confidence 0 for a text in no language."""
    ranked = langid.identify(text)[:DETECTIONS]
    if not ranked:
        return [{"confidence": 0.0, "language": source}]
    return [{"confidence": confidence, "language": code} for code, confidence in ranked]


def frontend_settings(config: ServeConfig, pair: tuple[str, str]) -> dict[str, Any]:
    """LibreTranslate's ``/frontend/settings`` for a server of ``pair``."""
    source, target = pair[0].split(",")[0], pair[1].split(",")[0]
    return {
        "charLimit": config.max_chars,
        "frontendTimeout": FRONTEND_TIMEOUT_MS,
        "apiKeys": bool(config.api_key),
        "keyRequired": bool(config.api_key),
        "suggestions": False,
        "filesTranslation": False,
        "supportedFilesFormat": [],
        "language": {
            "source": {"code": source, "name": language_name(source)},
            "target": {"code": target, "name": language_name(target)},
        },
    }
