"""Rate limits of `mtkit serve` (``--rate-limit N``): a token bucket per API key, or per client.

Each requester has a bucket of N tokens, refilled continuously at N/60 tokens a second (the
token bucket of traffic shaping, e.g. RFC 2697's committed burst). A request takes one token;
a request that finds less than one is refused with 429, ``Retry-After`` (the whole seconds until
a token is back) and a JSON body naming the field, and takes nothing. So a quiet client may
send a burst of N at once, and no client gets more than N a minute over any longer stretch.

Who a requester is follows LibreTranslate's key function (``get_limits_key_func`` in
``libretranslate/app.py``): the API key when the request carries the right one
(``"field": "api_key"``), else the client's address (``"field": "client"``: the peer's IP, or
with a reverse proxy on this machine the ``X-Forwarded-For`` that uvicorn trusts from
127.0.0.1). A missing or wrong key is counted against the address before it is refused, so
guessing keys is limited as well, and a new key per request buys no new bucket.

A bucket that has refilled is the same as a new one, so full buckets are dropped whenever the
table has doubled since the last sweep: memory follows the clients of the last minute.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from fastapi import Request

from mtkit.config import ServeConfig
from mtkit.serve.errors import ApiError
from mtkit.serve.service import check_key

SWEEP_AT = 1024  # buckets before the first sweep


class RateLimit:
    """``per_minute`` requests a minute per requester; ``clock`` (seconds) for the tests."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute < 1:
            raise ValueError(f"per_minute must be positive, got {per_minute}")
        self.per_minute, self.rate = per_minute, per_minute / 60.0  # tokens a second
        self.clock = clock
        self.buckets: dict[str, tuple[float, float]] = {}  # requester -> (tokens, at time)
        self._sweep_at = SWEEP_AT

    def take(self, requester: str) -> float:
        """Take one of ``requester``'s tokens: 0.0, or (none left) the seconds until one is
        back, taking nothing."""
        now = self.clock()
        tokens = self._tokens(requester, now)
        if tokens < 1:
            self.buckets[requester] = (tokens, now)
            return (1 - tokens) / self.rate
        self.buckets[requester] = (tokens - 1, now)
        if len(self.buckets) >= self._sweep_at:
            self._sweep(now)
        return 0.0

    def check(self, field: str, requester: str) -> None:
        """:meth:`take`, or an :class:`ApiError` 429 naming ``field``, with ``Retry-After``."""
        wait = self.take(f"{field}:{requester}")
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            raise ApiError(
                429,
                field,
                f"more than {self.per_minute} requests a minute "
                f"(--rate-limit); try again in {seconds} s",
                {"Retry-After": str(seconds)},
            )

    def _tokens(self, requester: str, now: float) -> float:
        if requester not in self.buckets:
            return float(self.per_minute)
        tokens, at = self.buckets[requester]
        return min(float(self.per_minute), tokens + (now - at) * self.rate)

    def _sweep(self, now: float) -> None:
        """Drop the buckets that have refilled (the same as new ones)."""
        full = [who for who in self.buckets if self._tokens(who, now) >= self.per_minute]
        for who in full:
            del self.buckets[who]
        self._sweep_at = max(SWEEP_AT, 2 * len(self.buckets))


def admit(
    limit: RateLimit | None, config: ServeConfig, request: Request, data: dict[str, Any] | None
) -> None:
    """The API key check (401/403, :func:`~mtkit.serve.service.check_key`), with a token taken
    first when ``limit`` is on (429 beyond it): the key's for the right key, else the client's
    (``data``: the request's fields, None to look at the headers alone)."""
    try:
        check_key(config, request, data)
    except ApiError:
        if limit is not None:
            limit.check("client", client_address(request))
        raise
    if limit is not None:
        if config.api_key:
            limit.check("api_key", config.api_key)
        else:
            limit.check("client", client_address(request))


def client_address(request: Request) -> str:
    return request.client.host if request.client else ""
