"""`mtkit serve`: load an engine in the background, serve it over HTTP with uvicorn.

The socket is bound first (so the address is known, and printed, at once); the model loads in a
thread while ``/health`` answers ``loading``. SIGINT and SIGTERM stop the server: it stops
accepting connections, answers every request already received (uvicorn waits up to the request
``timeout`` plus a few seconds for them), stops the model worker and returns 0. A model that
fails to load stops the server with that error (exit status 1).
"""

from __future__ import annotations

import importlib.util
import logging
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import torch

from mtkit.config import ServeConfig, TranslateConfig
from mtkit.engines import load_engine
from mtkit.engines.base import Engine
from mtkit.engines.native import NativeEngine
from mtkit.errors import MtkitError
from mtkit.serve.app import create_app
from mtkit.serve.batcher import Batcher
from mtkit.serve.dispatcher import Dispatcher
from mtkit.serve.languages import resolve_languages
from mtkit.serve.service import Model, Service, token_counter
from mtkit.text.glossary import read_glossary

log = logging.getLogger("mtkit.serve")
AUTO_DECODERS = 4  # --decoders 0: one per thread, at most this many (each loads the model)
GRACE = 5.0  # seconds beyond the request timeout that a shutdown waits for requests in flight


def load_model(models: list[str], config: TranslateConfig, serve: ServeConfig) -> Model:
    """The engine (warmed up on one line), its language pair, its glossary and a started
    batcher."""
    glossary = (
        read_glossary(config.glossary, config.glossary_ignore_case) if config.glossary else None
    )
    given = (serve.source_lang, serve.target_lang)
    engine = load_engine(models, config)
    pair = resolve_languages(given, engine, models[0])
    engine.translate(["warm up"], config.search)  # first-call costs (weight packing) go here
    if isinstance(engine, NativeEngine):
        step = "compiled" if engine.compiled else "eager"
        log.info("decoding step: %s (--compile %s)", step, config.compile)
    return Model(
        engine,
        pair,
        batcher(engine, serve).start(),
        config.search,
        name=", ".join(models),
        glossary=glossary,
    )


def batcher(engine: Engine, serve: ServeConfig) -> Batcher | Dispatcher:
    """Step-level batching where asked (the default) and the engine steps its searches
    (mtkit's own, in this process), else whole batches of requests; the log says which."""
    if serve.batching == "step" and isinstance(engine, NativeEngine):
        count = decoders(engine, serve.decoders)
        where = f"{count} decoding processes" if count > 1 else "one decoding thread"
        log.info("batching: step-level in %s (sentences join and leave a running search)", where)
        return Dispatcher(
            engine, serve.max_batch_tokens, serve.queue_size, serve.slice_tokens, count
        )
    if serve.batching == "step":
        log.info("batching: whole requests (%s decodes batches whole)", type(engine).__name__)
    return Batcher(
        engine,
        serve.max_batch_tokens,
        serve.max_wait_ms / 1000,
        serve.queue_size,
        token_counter(engine),
        serve.slice_tokens,
    )


def decoders(engine: NativeEngine, asked: int) -> int:
    """``--decoders``, or with 0 one per thread on a CPU (at most AUTO_DECODERS; a step at a
    server's few hundred rows hardly gains from a second thread, a second process doubles
    the steps: benchmarks/results/serve-decoders-2026-11-29.txt) and one on a GPU."""
    if asked:
        return asked
    if engine.device.type != "cpu":
        return 1
    return max(1, min(torch.get_num_threads(), AUTO_DECODERS))


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: any free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except (OSError, OverflowError) as err:
        sock.close()
        reason = getattr(err, "strerror", None) or err
        raise MtkitError(f"cannot listen on {host}:{port} ({reason})") from None
    sock.listen(2048)  # connections wait in the backlog until uvicorn serves them
    return sock


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name, wanted in (("mtkit.serve", level.upper()), ("uvicorn", "WARNING")):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(max(logging.getLevelName(wanted), logging.getLevelName(level.upper())))
        logger.propagate = False


def serve(models: list[str], config: TranslateConfig, serve_config: ServeConfig) -> int:
    """Serve ``models`` until SIGINT/SIGTERM (exit status 0) or a failed load (1)."""
    import uvicorn

    for path in models:
        if not Path(path).exists():
            raise MtkitError(f"{path}: no such model")
    setup_logging(serve_config.log_level)
    sock = bind(serve_config.host, serve_config.port)
    service = Service(serve_config)
    http, loop = http_stack()
    log.info("http: %s, event loop: %s", http, loop)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(service),
            http=http,
            loop=loop,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=serve_config.timeout + GRACE,
        )
    )
    host, port = sock.getsockname()[:2]
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}/"
    print(
        f"mtkit serve: listening on {url} (loading {', '.join(models)})",
        file=sys.stderr,
        flush=True,
    )

    def load() -> None:
        try:
            service.model = load_model(models, config, serve_config)
        except Exception as err:  # a failed load ends the server, with the reason
            service.error = str(err) if isinstance(err, MtkitError) else repr(err)
            server.should_exit = True
            return
        src, tgt = service.model.pair
        log.info(
            "ready: %s-%s, engine %s, beam %d (%s)",
            src,
            tgt,
            config.engine,
            config.search.width,
            url,
        )

    threading.Thread(target=load, name="mtkit-load", daemon=True).start()
    stopped_by = _run(server, sock)
    if service.model is not None:
        service.model.batcher.close(timeout=GRACE)
    if service.error:
        raise MtkitError(service.error)
    if stopped_by:
        print(f"mtkit serve: stopped by {signal.Signals(stopped_by).name}", file=sys.stderr)
    return 0


def http_stack() -> tuple[str, str]:
    """uvicorn's HTTP parser and event loop: httptools and uvloop (C; the serve extra installs
    them) where they import, else h11 and asyncio (pure Python: more of each request's time
    on the event loop, which shares the CPU with the decoder)."""
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    return http, loop


def _run(server: Any, sock: socket.socket) -> int:
    """Run uvicorn; the signal that stopped it (0: none). uvicorn raises the signal again once
    it is done: a handler of ours takes it, so that the process ends normally."""
    caught: list[int] = []
    signals = (signal.SIGINT, signal.SIGTERM)
    old = {sig: signal.signal(sig, lambda signum, frame: caught.append(signum)) for sig in signals}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return caught[0] if caught else 0
