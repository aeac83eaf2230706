"""The HTTP side of `mtkit serve`: a FastAPI app over a :class:`Service`.

The model loads in the background (``/health`` says ``loading``, then ``ready``); requests are
checked by :mod:`mtkit.serve.api`, translated through the :class:`~mtkit.serve.batcher.Batcher`
and answered in LibreTranslate's shapes. Every refusal is JSON naming the field at fault, and
no mistake of a client's leaves a traceback in the log. One log line per request
(``mtkit.serve`` logger, level info): method, path, status, latency, and for translations the
lines and target tokens.

Every route answers pages of other origins (browser extensions, editors' webviews) as
LibreTranslate does: Starlette's CORS middleware sends ``Access-Control-Allow-Origin`` for the
origins of ``--cors-origins`` (``*``: any) and answers preflight ``OPTIONS`` requests itself.
``--rate-limit``: :mod:`mtkit.serve.limits`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.requests import ClientDisconnect

from mtkit.config import SearchConfig
from mtkit.errors import MtkitError
from mtkit.serve import detect, files
from mtkit.serve.api import TranslateRequest, build_response, parse_request, request_glossary
from mtkit.serve.batcher import Batcher
from mtkit.serve.bodies import decode_request
from mtkit.serve.dispatcher import Dispatcher
from mtkit.serve.errors import ApiError
from mtkit.serve.languages import language_name
from mtkit.serve.limits import RateLimit, admit
from mtkit.serve.service import (
    Model,
    Service,
    error_response,
    key_in_headers,
    read_body,
)
from mtkit.serve.texts import (
    TEXT_THREADS,
    Answer,
    Deadline,
    batched,
    batcher_units,
    dispatched_units,
    late,
    translate_request,
)
from mtkit.text.glossary import constraining
from mtkit.text.translate import TextOptions, as_trained, source_limit

log = logging.getLogger("mtkit.serve")
CORS_MAX_AGE = 86_400  # seconds a browser may keep a preflight's answer (it may keep less)


TRANSLATE_FIELDS = {
    "type": "object",
    "required": ["q", "source", "target"],
    "properties": {
        "q": {
            "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
            "description": "Text or a list of texts",
        },
        "source": {"type": "string", "description": "Source code, or 'auto'"},
        "target": {"type": "string"},
        "format": {"type": "string", "enum": ["text", "html"], "default": "text"},
        "alternatives": {
            "type": "integer",
            "minimum": 0,
            "default": 0,
            "description": "More translations from the n-best list",
        },
        "beam": {
            "type": "integer",
            "minimum": 1,
            "description": "Beam width (mtkit; default: the server's)",
        },
        "split": {
            "type": "boolean",
            "default": True,
            "description": "Cut texts into sentences, each translated (mtkit; "
            "false: each line is one sentence)",
        },
        "scores": {
            "type": "boolean",
            "default": False,
            "description": "Answer each text's confidence in [0, 1] (mtkit)",
        },
        "flag_below": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "Answer which texts' confidence is below this (mtkit; implies scores)",
        },
        "api_key": {"type": "string"},
    },
}
# JSON, a form, a multipart form, or no body at all and the fields in the query string
TRANSLATE_BODY = {
    "required": False,
    "content": {
        "application/json": {
            "schema": TRANSLATE_FIELDS,
            "example": {"q": "A man rides a bike.", "source": "en", "target": "de"},
        },
        "application/x-www-form-urlencoded": {"schema": TRANSLATE_FIELDS},
        "multipart/form-data": {"schema": TRANSLATE_FIELDS},
    },
}


def create_app(service: Service) -> FastAPI:
    """The app: /translate, /languages, /health, / (the page), /docs and /openapi.json.
    ``app.state.rate_limit``: the :class:`RateLimit` every translating route takes from."""
    config = service.config
    about = "Machine translation with mtkit, LibreTranslate-compatible."
    app = FastAPI(title="mtkit serve", version="1", description=about)
    if config.cors_origins:  # inside RequestLog: preflights are logged too
        app.add_middleware(
            CORSMiddleware,
            allow_origins=config.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["*"],
            expose_headers=["Retry-After"],
            max_age=CORS_MAX_AGE,
        )
    app.add_middleware(RequestLog)
    rate = app.state.rate_limit = RateLimit(config.rate_limit) if config.rate_limit else None
    app.include_router(files.router(service))

    @app.post("/translate", openapi_extra={"requestBody": TRANSLATE_BODY})
    async def translate(request: Request) -> JSONResponse:
        """Translate one text or a list of texts (LibreTranslate's API)."""
        start = time.monotonic()
        try:
            keyed = key_in_headers(request)
            if keyed:  # a key in a header is checked (and counted) before the body is read
                admit(rate, config, request, None)
            model = service.ready()
            try:
                body = await read_body(request, config.max_body_bytes)
            except ClientDisconnect:  # nobody is left to answer: a 400 for the log alone
                raise ApiError(400, "body", "the client left before sending it all") from None
            data = decode_request(
                body,
                request.headers.get("content-type", ""),
                request.scope.get("query_string", b""),
            )
            if not keyed:  # the key, if any, is a field
                admit(rate, config, request, data)
            checked = parse_request(data, model.pair, model.search, config)
            try:
                model.engine.check(checked.search)
            except MtkitError as err:
                field = (
                    "glossary"
                    if checked.glossary
                    else "alternatives"
                    if checked.alternatives
                    else "beam"
                )
                raise ApiError(400, field, str(err)) from None
            search = checked.search
            if checked.format != "text":  # markup is carried by the word alignments
                search = search.replace(alignment=True)
                try:
                    model.engine.check(search)
                except MtkitError as err:
                    raise ApiError(400, "format", str(err)) from None
            answer = await _answered(
                model, checked, search, Deadline(start + config.timeout, config.timeout)
            )
        except ApiError as err:
            return error_response(err)
        state = request.scope.setdefault("state", {})
        state["lines"], state["tokens"] = answer.units, answer.tokens
        return JSONResponse(
            build_response(
                checked, answer.texts, answer.alternatives, answer.confidence, answer.guard
            )
        )

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
        return JSONResponse(
            {
                "status": "ready",
                "model": model.name,
                "source": model.pair[0],
                "target": model.pair[1],
                "waiting": model.batcher.waiting,
                "batches": model.batcher.stats.batches,
                **decoder_stats(model.batcher),
            }
        )

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(PAGE)

    app.include_router(detect.router(service))  # /detect, /frontend/settings
    return app


async def _answered(
    model: Model, checked: TranslateRequest, search: SearchConfig, deadline: Deadline
) -> Answer:
    """The request through the text layer (:mod:`mtkit.serve.texts`, in a text thread), its
    units through the batcher, within the ``deadline``."""
    loop = asyncio.get_running_loop()

    async def submit(lines: list[str], phrases: list[list[str]] | None) -> list:
        return await batched(model.batcher, checked.tagged(lines), search, deadline, phrases)

    engine = model.engine
    terms = request_glossary(model.glossary, checked.glossary)
    gone = threading.Event()  # the request needs no more of its units
    if isinstance(model.batcher, Dispatcher):  # step-level: its searches from its text thread
        units = dispatched_units(model.batcher, search, gone, checked.tagged, constraining(terms))
    else:
        units = batcher_units(submit, loop, constraining(terms))
    trained = as_trained(engine, TextOptions(), terms.source_words if terms else ())
    translated = loop.run_in_executor(
        TEXT_THREADS,
        translate_request,
        checked,
        engine.src_tokenizer,
        source_limit(engine),
        units,
        trained,
    )
    try:
        return await asyncio.wait_for(translated, deadline.left())
    except asyncio.TimeoutError:
        gone.set()  # its rows leave the running search: nothing of it after its answer
        raise late(deadline) from None
    except asyncio.CancelledError:  # the client went away: nothing more of it is decoded
        gone.set()
        raise
    except MtkitError as err:  # a document the text layer cannot read (XML that does not parse)
        raise ApiError(400, "q", str(err)) from None


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
            log.info(
                "%s %s %d %.1fms%s",
                scope["method"],
                scope["path"],
                status[0],
                (time.monotonic() - start) * 1000,
                extra,
            )


PAGE = resources.files("mtkit.serve").joinpath("static/index.html").read_text(encoding="utf-8")


def decoder_stats(batcher: Batcher | Dispatcher) -> dict[str, Any]:
    """Step-level batching's decoder: steps taken, rows joined and dropped (/health)."""
    if not isinstance(batcher, Dispatcher):
        return {"batching": "request"}
    stats = batcher.scheduler.stats
    return {
        "batching": "step",
        "steps": stats.steps,
        "joined": stats.joined,
        "dropped": stats.dropped,
    }
