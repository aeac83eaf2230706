"""A checked request translated through the text layer, its units through the batcher.

The server reads texts as `mtkit translate` does, through :mod:`mtkit.text` (segmentation,
untranslatable spans, markup, alignments): the text layer runs in a thread of
:data:`TEXT_THREADS` and hands its units to the cross-request batcher on the event loop
(:func:`batcher_units`), so that the units of concurrent requests are still decoded together;
with step-level batching it decodes them itself (:func:`dispatched_units`), its searches
stepped with every other request's on the engine's decoding thread.
With ``"split": false`` each line of a text is one sentence, translated as it is, its line
breaks kept as they were.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from mtkit.config import SearchConfig
from mtkit.data.tokenizer import Tokenizer
from mtkit.decoding.scheduler import Cancelled
from mtkit.engines.base import Translation
from mtkit.engines.confidence import Confidence
from mtkit.engines.decoders import DecoderLost
from mtkit.errors import MtkitError
from mtkit.serve.api import TranslateRequest
from mtkit.serve.batcher import Batcher, Closed, QueueFull
from mtkit.serve.dispatcher import Dispatcher
from mtkit.serve.errors import ApiError
from mtkit.text.glossary import Constrain
from mtkit.text.translate import Counted, TextOptions, Units, translate_documents

log = logging.getLogger("mtkit.serve")

# text-layer work of requests waiting on the batcher: threads that mostly wait, one per request
TEXT_THREADS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="mtkit-text")


@dataclass
class Answer:
    """A request's translations, its alternatives (per text, per rank), and for the log the
    units decoded and their target tokens."""

    texts: list[str]
    alternatives: list[list[str]]
    units: int = 0
    tokens: int = 0
    confidence: list[float] | None = None  # per text, when the request asks for scores
    guard: list[str | None] | None = None  # per text: how the decoding guard translated it


def batcher_units(
    submit: Callable[[list[str], list[list[str]] | None], Awaitable[list[list[Translation]]]],
    loop: asyncio.AbstractEventLoop,
    constrain: Constrain | None = None,
) -> Units:
    """Units translated by ``submit`` (a coroutine on ``loop``), called from a text thread,
    each with the constraints ``constrain`` gives it."""

    def translate(lines: list[str], numbers: list[int]) -> list[list[Translation]]:
        phrases = None
        if constrain is not None:
            phrases = [constrain(line, n) for line, n in zip(lines, numbers, strict=True)]
        return asyncio.run_coroutine_threadsafe(submit(lines, phrases), loop).result()

    return translate


def dispatched_units(
    dispatcher: Dispatcher,
    search: SearchConfig,
    gone: threading.Event,
    tagged: Callable[[list[str]], list[str]],
    constrain: Constrain | None = None,
) -> Units:
    """Units translated in the calling text thread itself (step-level batching:
    :meth:`Dispatcher.translate_now`), each with the constraints ``constrain`` gives it and
    ``tagged`` (a multilingual model's target tag); every failure an :class:`ApiError`, as
    :func:`batched` makes them. ``gone``: set once the request needs no more of them."""

    def translate(lines: list[str], numbers: list[int]) -> list[list[Translation]]:
        phrases = None
        if constrain is not None:
            phrases = [constrain(line, n) for line, n in zip(lines, numbers, strict=True)]
        try:
            return dispatcher.translate_now(tagged(lines), search, phrases, gone)
        except Cancelled:  # answered already (a 504), or its client left: no one reads this
            raise ApiError(504, "timeout", "the request went away") from None
        except Exception as err:  # noqa: BLE001 - as the request's answer
            raise api_error(err) from None

    return translate


def translate_request(
    request: TranslateRequest,
    tokenizer: Tokenizer,
    limit: int,
    units: Units,
    trained: TextOptions | None = None,
) -> Answer:
    """The request's texts translated (``limit``: source pieces a unit may have; ``trained``:
    how the model's training data reads texts, :func:`~mtkit.text.translate.as_trained`)."""
    counted = Counted(units)
    options = replace(
        trained or TextOptions(),
        lang=request.source,
        split=request.split,
        format=request.format,
    )
    found = translate_documents(
        request.texts,
        options,
        tokenizer,
        limit,
        counted,
        scores=request.scores,
        alternatives=request.alternatives,
    )
    confidence = None
    if request.scores:  # over all the pieces of all the text's units
        confidence = [(t.confidence or Confidence()).probability for t in found]
    guard = [t.guard for t in found] if request.format == "text" else None
    return Answer(
        [t.text for t in found],
        [list(t.alternatives) for t in found],
        counted.lines,
        counted.tokens,
        confidence,
        guard,
    )


@dataclass(frozen=True)
class Deadline:
    """When a request must be answered (monotonic seconds), and the ``--timeout`` it came from
    (for the 504's message: the time left is less once the request has waited)."""

    at: float
    seconds: float

    def left(self) -> float:
        return max(self.at - time.monotonic(), 0.0)


async def batched(
    batcher: Batcher | Dispatcher,
    lines: list[str],
    search: SearchConfig,
    deadline: Deadline,
    phrases: list[list[str]] | None = None,
) -> list:
    """Queue ``lines`` (with their constraint ``phrases``) on the batcher, wait for their
    translations until ``deadline``; every failure an :class:`ApiError` (503 busy or closing,
    504 late, 400, 500)."""
    try:
        job = batcher.submit(lines, search, phrases)
    except (QueueFull, Closed) as err:
        raise api_error(err) from None
    try:
        return await asyncio.wait_for(asyncio.wrap_future(job.future), deadline.left())
    except asyncio.CancelledError:  # the client went away: nothing more of it is decoded
        job.cancel()
        raise
    except asyncio.TimeoutError:
        job.cancel()  # its rows leave the running search: nothing of it after its answer
        raise late(deadline) from None
    except Exception as err:  # noqa: BLE001 - as the request's answer
        raise api_error(err) from None


def late(deadline: Deadline) -> ApiError:
    """The 504 of a request not answered by its ``deadline``."""
    return ApiError(
        504, "timeout", f"no translation within {seconds_text(deadline.seconds)} (--timeout)"
    )


def api_error(err: Exception) -> ApiError:
    """What a translation's failure answers: 503 busy or closing, 400 for the request's
    text, else 500 (the engine failed on this request, and on this one alone: logged)."""
    if isinstance(err, ApiError):
        return err
    if isinstance(err, QueueFull):
        return ApiError(503, "queue", f"the server is busy: {err}", {"Retry-After": "1"})
    if isinstance(err, (Closed, DecoderLost)):
        return ApiError(503, "server", str(err), {"Retry-After": "5"})
    if isinstance(err, MtkitError):
        return ApiError(400, "q", str(err))
    log.error("translation failed", exc_info=err)
    return ApiError(500, "q", f"translation failed ({type(err).__name__})")


def seconds_text(value: float) -> str:
    return f"{math.ceil(max(value, 0) * 10) / 10:g} s"
