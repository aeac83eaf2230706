"""The HTTP side of `mtkit serve`: a FastAPI app over a :class:`Service`.

The model loads in the background (``/health`` says ``loading``, then ``ready``); requests are
checked by :mod:`mtkit.serve.api`, translated through the :class:`~mtkit.serve.batcher.Batcher`
and answered in LibreTranslate's shapes. Every refusal is JSON naming the field at fault. One
log line per request (``mtkit.serve`` logger, level info): method, path, status, latency,
and for translations the lines and target tokens.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse

from mtkit.config import SearchConfig
from mtkit.errors import MtkitError
from mtkit.serve import files
from mtkit.serve.api import (
    ApiError,
    TranslateRequest,
    build_response,
    decode_body,
    parse_request,
)
from mtkit.serve.batcher import Batcher, Closed, QueueFull
from mtkit.serve.languages import language_name
from mtkit.serve.service import (
    Model,
    Service,
    check_key,
    error_response,
    key_in_headers,
    read_body,
)
from mtkit.serve.texts import TEXT_THREADS, Answer, batcher_units, translate_request
from mtkit.text.translate import source_limit

log = logging.getLogger("mtkit.serve")


TRANSLATE_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["q", "source", "target"],
                "properties": {
                    "q": {"oneOf": [{"type": "string"},
                                    {"type": "array", "items": {"type": "string"}}],
                          "description": "Text or a list of texts"},
                    "source": {"type": "string", "description": "Source code, or 'auto'"},
                    "target": {"type": "string"},
                    "format": {"type": "string", "enum": ["text", "html"], "default": "text"},
                    "alternatives": {"type": "integer", "minimum": 0, "default": 0,
                                     "description": "More translations from the n-best list"},
                    "beam": {"type": "integer", "minimum": 1,
                             "description": "Beam width (mtkit; default: the server's)"},
                    "split": {"type": "boolean", "default": True,
                              "description": "Cut texts into sentences, each translated (mtkit; "
                                             "false: each line is one sentence)"},
                    "api_key": {"type": "string"},
                },
            },
            "example": {"q": "A man rides a bike.", "source": "en", "target": "de"},
        }
    },
}  # fmt: skip


def create_app(service: Service) -> FastAPI:
    """The app: /translate, /languages, /health, / (the page), /docs and /openapi.json."""
    config = service.config
    about = "Machine translation with mtkit, LibreTranslate-compatible."
    app = FastAPI(title="mtkit serve", version="1", description=about)
    app.add_middleware(RequestLog)
    app.include_router(files.router(service))

    @app.post("/translate", openapi_extra={"requestBody": TRANSLATE_BODY})
    async def translate(request: Request) -> JSONResponse:
        """Translate one text or a list of texts (LibreTranslate's API)."""
        start = time.monotonic()
        try:
            if key_in_headers(request):  # refuse a wrong key before reading the body
                check_key(config, request, None)
            model = service.ready()
            data = decode_body(await read_body(request, config.max_body_bytes),
                               request.headers.get("content-type", ""))  # fmt: skip
            check_key(config, request, data)
            checked = parse_request(data, model.pair, model.search, config)
            try:
                model.engine.check(checked.search)
            except MtkitError as err:
                raise ApiError(400, "alternatives" if checked.alternatives else "beam",
                               str(err)) from None  # fmt: skip
            search = checked.search
            if checked.format != "text":  # markup is carried by the word alignments
                search = search.replace(alignment=True)
                try:
                    model.engine.check(search)
                except MtkitError as err:
                    raise ApiError(400, "format", str(err)) from None
            answer = await _answered(model, checked, search, start + config.timeout)
        except ApiError as err:
            return error_response(err)
        state = request.scope.setdefault("state", {})
        state["lines"], state["tokens"] = answer.units, answer.tokens
        return JSONResponse(build_response(checked, answer.texts, answer.alternatives))

    @app.get("/languages")
    async def languages() -> Any:
        """The languages this server translates (LibreTranslate's shape)."""
        try:
            src, tgt = service.ready().pair
        except ApiError as err:
            return error_response(err)
        targets = tgt.split(",")  # a multilingual model's targets (issue 16)
        return [
            {"code": src, "name": language_name(src), "targets": targets},
            *({"code": t, "name": language_name(t), "targets": []} for t in targets),
        ]

    @app.get("/health")
    async def health() -> JSONResponse:
        """200 and ``ready`` once the model is loaded; 503 ``loading`` (or ``failed``) before."""
        model = service.model
        if model is None:
            status = "failed" if service.error else "loading"
            return JSONResponse({"status": status, "error": service.error}, status_code=503)
        return JSONResponse({"status": "ready", "model": model.name,
                             "source": model.pair[0], "target": model.pair[1],
                             "waiting": model.batcher.waiting,
                             "batches": model.batcher.stats.batches})  # fmt: skip

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(PAGE)

    return app


async def _answered(
    model: Model, checked: TranslateRequest, search: SearchConfig, deadline: float
) -> Answer:
    """The request through the text layer (:mod:`mtkit.serve.texts`, in a text thread), its
    units through the batcher, within the ``deadline`` (monotonic seconds)."""
    loop = asyncio.get_running_loop()

    async def submit(lines: list[str]) -> list:
        return await _translated(model.batcher, checked.tagged(lines), search,
                                 deadline - time.monotonic())  # fmt: skip

    engine = model.engine
    try:
        return await loop.run_in_executor(TEXT_THREADS, translate_request, checked,
                                          engine.src_tokenizer, source_limit(engine),
                                          batcher_units(submit, loop))  # fmt: skip
    except MtkitError as err:  # a document the text layer cannot read (XML that does not parse)
        raise ApiError(400, "q", str(err)) from None


async def _translated(
    batcher: Batcher, lines: list[str], search: SearchConfig, timeout: float
) -> list:
    """Queue ``lines``, wait for their translations at most ``timeout`` seconds."""
    try:
        job = batcher.submit(lines, search)
    except QueueFull as err:
        raise ApiError(503, "queue", f"the server is busy: {err}", {"Retry-After": "1"}) from None
    except Closed as err:
        raise ApiError(503, "server", str(err), {"Retry-After": "5"}) from None
    try:
        return await asyncio.wait_for(asyncio.wrap_future(job.future), max(timeout, 0.0))
    except asyncio.TimeoutError:
        raise ApiError(504, "timeout", f"no translation within {_seconds(timeout)} "
                                       "(--timeout)") from None  # fmt: skip
    except MtkitError as err:
        raise ApiError(400, "q", str(err)) from None
    except Exception as err:  # the engine failed on this request (and on this one alone)
        log.exception("translation failed")
        raise ApiError(500, "q", f"translation failed ({type(err).__name__})") from None


def _seconds(value: float) -> str:
    return f"{math.ceil(max(value, 0) * 10) / 10:g} s"


class RequestLog:
    """ASGI middleware: one log line per request, with lines and tokens where the route set
    them (``scope["state"]``)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.monotonic(), [0]

        async def sending(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            state = scope.get("state") or {}
            extra = ""
            if "lines" in state:
                extra = f" lines={state['lines']} tokens={state['tokens']}"
            log.info("%s %s %d %.1fms%s", scope["method"], scope["path"], status[0],
                     (time.monotonic() - start) * 1000, extra)  # fmt: skip


PAGE = resources.files("mtkit.serve").joinpath("static/index.html").read_text(encoding="utf-8")
