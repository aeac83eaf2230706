"""mtkit.serve.limits: the token bucket on an injected clock, and who pays for a request."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("fastapi", reason="needs the 'serve' extra: pip install -e '.[serve]'")

from mtkit.config import ServeConfig  # noqa: E402
from mtkit.serve import limits  # noqa: E402
from mtkit.serve.errors import ApiError  # noqa: E402
from mtkit.serve.limits import RateLimit, admit  # noqa: E402


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_of_n_then_one_token_every_60_over_n_seconds() -> None:
    clock = Clock()
    limit = RateLimit(3, clock)  # a token every 20 s
    assert [limit.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limit.take("a") == pytest.approx(20.0)
    assert limit.take("b") == 0.0  # every requester has a bucket of its own
    clock.now += 5
    assert limit.take("a") == pytest.approx(15.0)  # refused requests take nothing
    clock.now += 15
    assert limit.take("a") == 0.0
    assert limit.take("a") == pytest.approx(20.0)
    clock.now += 3600  # a quiet hour refills the bucket, and no more than that
    assert [limit.take("a") for _ in range(4)][-2:] == [0.0, pytest.approx(20.0)]


def test_over_any_minute_no_more_than_n_plus_the_refill() -> None:
    clock = Clock()
    limit, taken = RateLimit(6, clock), 0
    for _ in range(600):  # a request every 0.25 s for 150 s
        taken += limit.take("a") == 0.0
        clock.now += 0.25
    assert taken == 6 + 14  # the burst, then a token every 10 s: 14 whole ones by 149.75 s


def test_check_raises_a_429_naming_the_field_with_retry_after() -> None:
    clock = Clock()
    limit = RateLimit(2, clock)
    limit.check("api_key", "k")
    clock.now += 0.4
    limit.check("api_key", "k")
    with pytest.raises(ApiError) as err:
        limit.check("api_key", "k")
    assert (err.value.status, err.value.field, err.value.headers) == (
        429,
        "api_key",
        {"Retry-After": "30"},
    )
    assert str(err.value) == (
        "api_key: more than 2 requests a minute (--rate-limit); try again in 30 s"
    )
    limit.check("client", "k")  # the same name as a client is another requester
    clock.now += 29.3  # 0.3 s of a token missing: Retry-After is at least 1
    with pytest.raises(ApiError) as err:
        limit.check("api_key", "k")
    assert err.value.headers == {"Retry-After": "1"}


def test_full_buckets_are_swept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "SWEEP_AT", 4)
    clock = Clock()
    limit = RateLimit(2, clock)
    limit.take("old")
    clock.now += 60  # "old" has refilled: the same as no bucket
    limit.take("busy")
    limit.take("busy")
    limit.take("c")
    limit.take("d")  # the fourth bucket: a sweep
    assert set(limit.buckets) == {"busy", "c", "d"}
    assert limit.take("busy") > 0  # a bucket in use keeps its count
    assert limit.take("old") == 0.0


def request(headers: dict[str, str], host: str = "198.51.100.1") -> SimpleNamespace:
    return SimpleNamespace(
        headers={k.lower(): v for k, v in headers.items()}, client=SimpleNamespace(host=host)
    )


def test_the_right_key_pays_from_its_bucket_anything_else_from_the_clients() -> None:
    config, limit = ServeConfig(api_key="s3cret"), RateLimit(2, Clock())
    admit(limit, config, request({"X-API-Key": "s3cret"}), None)
    admit(limit, config, request({}, host="198.51.100.9"), {"api_key": "s3cret"})
    with pytest.raises(ApiError) as err:  # the key is spent, from any address
        admit(limit, config, request({}, host="198.51.100.2"), {"api_key": "s3cret"})
    assert (err.value.status, err.value.field) == (429, "api_key")
    statuses = []
    for headers in ({"X-API-Key": "guess1"}, {}, {"X-API-Key": "guess2"}):
        with pytest.raises(ApiError) as err:
            admit(limit, config, request(headers), {})
        statuses.append((err.value.status, err.value.field))
    assert statuses == [(403, "api_key"), (401, "api_key"), (429, "client")]  # guesses paid
    with pytest.raises(ApiError, match="invalid API key"):  # another client is not limited
        admit(limit, config, request({"X-API-Key": "guess3"}, host="198.51.100.3"), None)


def test_without_a_key_every_client_has_a_bucket_and_without_a_limit_nothing_is_counted():
    config, limit = ServeConfig(), RateLimit(1, Clock())
    admit(limit, config, request({}, host="198.51.100.1"), {"api_key": "anything"})
    admit(limit, config, request({}, host="198.51.100.2"), None)
    with pytest.raises(ApiError) as err:
        admit(limit, config, request({}, host="198.51.100.1"), None)
    assert (err.value.status, err.value.field) == (429, "client")
    for _ in range(5):
        admit(None, config, request({}), None)
    with pytest.raises(ApiError, match="needs an API key"):
        admit(None, ServeConfig(api_key="k"), request({}), None)


def test_a_limit_is_positive() -> None:
    with pytest.raises(ValueError, match="per_minute must be positive, got 0"):
        RateLimit(0)
