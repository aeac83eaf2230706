"""mtkit.serve.service: readiness, the batcher's token counter, the API key."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("fastapi", reason="needs the 'serve' extra: pip install -e '.[serve]'")

from mtkit.config import ServeConfig  # noqa: E402
from mtkit.serve.errors import ApiError  # noqa: E402
from mtkit.serve.service import Service, check_key  # noqa: E402


class FakeTokenizer:
    def encode(self, lines: list[str]) -> list[list[int]]:
        return [[7] * len(line.split()) for line in lines]


def test_a_service_without_a_model_answers_503_with_retry_after() -> None:
    loading = Service(ServeConfig())
    with pytest.raises(ApiError) as err:
        loading.ready()
    assert (err.value.status, err.value.field) == (503, "model")
    assert err.value.headers == {"Retry-After": "1"} and "loading the model" in str(err.value)
    failed = Service(ServeConfig(), error="no such checkpoint")
    with pytest.raises(ApiError, match="failed to load: no such checkpoint"):
        failed.ready()


def request(headers: dict[str, str]) -> SimpleNamespace:
    return SimpleNamespace(headers={k.lower(): v for k, v in headers.items()})


@pytest.mark.parametrize(
    "headers, body, status",
    [
        ({"Authorization": "Bearer s3cret"}, None, None),
        ({"X-API-Key": "s3cret"}, None, None),
        ({}, {"api_key": "s3cret"}, None),
        ({}, {"q": "a"}, 401),
        ({"X-API-Key": "s3cre"}, None, 403),
        ({"Authorization": "Bearer nope"}, {"api_key": "s3cret"}, 403),  # the header wins
    ],
)
def test_check_key(headers: dict, body: dict | None, status: int | None) -> None:
    config = ServeConfig(api_key="s3cret")
    check_key(ServeConfig(), request(headers), body)  # no key configured: anything goes
    if status is None:
        check_key(config, request(headers), body)
        return
    with pytest.raises(ApiError) as err:
        check_key(config, request(headers), body)
    assert (err.value.status, err.value.field) == (status, "api_key")
