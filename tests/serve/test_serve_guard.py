"""The decoding guard's flag through the FastAPI app: ``"guard"`` beside ``translatedText``
(and ``confidence``), per text, only when the guard fired on a text of the request."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the 'serve' extra: pip install -e '.[serve]'")

sys.path.insert(0, str(Path(__file__).parents[1] / "engines"))
from asgi_helpers import post  # noqa: E402
from guard_helpers import GARBAGE, Scripted, caps_garbage  # noqa: E402

from mtkit.config import ServeConfig  # noqa: E402
from mtkit.serve.batcher import Batcher  # noqa: E402
from mtkit.serve.service import Model, Service  # noqa: E402


def service_of(engine: Scripted) -> Service:
    batcher = Batcher(engine, 2048, 0.0, 16).start()
    return Service(ServeConfig(), Model(engine, ("en", "de"), batcher, engine.config.search))


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    found = service_of(Scripted(caps_garbage))
    yield found
    found.ready().batcher.close(10)


def test_a_guarded_text_is_flagged(service: Service) -> None:
    status, answer = post(service, {"q": ["A DOG RUNS.", "a cat", "", "A dog."]})
    assert status == 200, answer
    assert answer == {
        "translatedText": ["DE: A DOG RUNS.", "de: a cat", "", "De: a dog."],
        "guard": ["recased", None, None, "lowercased"],
    }


def test_a_clean_request_keeps_libretranslates_shape(service: Service) -> None:
    assert post(service, {"q": "a cat. a dog."}) == (
        200,
        {"translatedText": "de: a cat. de: a dog."},
    )
    assert post(service, {"q": ["a cat"], "alternatives": 1}) == (
        200,
        {"translatedText": ["de: a cat"], "alternatives": [["de: a cat 1"]]},
    )


def test_the_flag_goes_beside_the_confidence(service: Service) -> None:
    status, answer = post(service, {"q": "a cat\nA DOG", "split": False, "scores": True})
    assert status == 200, answer
    assert answer["translatedText"] == "de: a cat\nDE: A DOG"
    assert answer["guard"] == "recased" and 0 < answer["confidence"] <= 1


def test_a_server_without_the_guard_answers_what_the_model_wrote() -> None:
    engine = Scripted(caps_garbage)
    engine.config.search = engine.config.search.replace(guard=False)
    plain = service_of(engine)
    try:
        status, answer = post(plain, {"q": "A DOG"})
    finally:
        plain.ready().batcher.close(10)
    assert (status, answer) == (200, {"translatedText": GARBAGE})
