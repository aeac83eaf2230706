"""``"scores": true`` and ``"flag_below"`` through the FastAPI app (in process, over ASGI)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi", reason="needs the 'serve' extra: pip install -e '.[serve]'")

from asgi_helpers import post  # noqa: E402

from mtkit.config import SearchConfig, ServeConfig, TranslateConfig  # noqa: E402
from mtkit.engines.confidence import Confidence  # noqa: E402
from mtkit.pipeline.serve import load_model  # noqa: E402
from mtkit.serve.api import parse_request  # noqa: E402
from mtkit.serve.errors import ApiError  # noqa: E402
from mtkit.serve.service import Service  # noqa: E402
from mtkit.text import TextOptions, translate_texts  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")
TEXTS = ["a man runs. the dog sits", "", "plays on the red street\nsee https://x.org now"]


@pytest.fixture(scope="module")
def service(ckpt: str) -> Iterator[Service]:
    # the random model loops: no decoding guard, whose flag would join the answers' fields
    config = TranslateConfig.from_flat({"device": "cpu", "threads": 1, "beam": 2, "guard": False})
    serve = ServeConfig(source_lang="en", target_lang="de")
    model = load_model([ckpt], config, serve)
    yield Service(serve, model)
    model.batcher.close(10)


def concatenated(parts: list[Confidence]) -> Confidence:
    """The confidence of lines written one after the other: their pieces, in order."""
    return Confidence(
        tuple(t for part in parts for t in part.tokens),
        tuple(w for part in parts for w in part.words),
        sum((part.logprob for part in parts), 0.0),
    )


@pytest.mark.parametrize("split", [True, False])
def test_confidence_is_each_texts_as_the_text_layer_scores_it(service: Service, split: bool):
    status, answer = post(service, {"q": TEXTS, "scores": True, "split": split})
    assert status == 200, answer
    engine = service.model.engine
    search = engine.config.search.replace(scores=True)
    texts = TEXTS if split else [line for text in TEXTS for line in text.split("\n")]
    found = translate_texts(engine, texts, TextOptions(split=split), search)
    scored = [t.confidence for t in found]
    if not split:  # the last text's two lines: one score over the pieces of both
        scored = [*scored[:2], concatenated(scored[2:])]
    expected = [round(c.probability, 4) for c in scored]
    assert answer["confidence"] == expected and expected[1] == 1.0  # nothing to translate
    assert all(0 < value <= 1 for value in expected)
    plain = post(service, {"q": TEXTS, "split": split})[1]
    assert plain == {"translatedText": answer["translatedText"]}  # no scores unless asked


def test_flag_below_lists_the_texts_under_it(service: Service) -> None:
    scores = post(service, {"q": TEXTS, "scores": True})[1]["confidence"]
    low = sorted(scores)
    assert low[1] < low[2]
    cut = (low[1] + low[2]) / 2  # the two lowest below it
    status, answer = post(service, {"q": TEXTS, "flag_below": cut})
    assert status == 200 and answer["confidence"] == scores
    assert answer["flagged"] == sorted(i for i, value in enumerate(scores) if value < cut)
    assert len(answer["flagged"]) == 2
    one = post(service, {"q": TEXTS[0], "flag_below": 1})[1]
    assert one["confidence"] == scores[0] and one["flagged"] is True  # a string q: a boolean
    assert post(service, {"q": TEXTS[0], "flag_below": 0})[1]["flagged"] is False


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"scores": "yes"}, "scores", "must be true or false"),
        ({"flag_below": 1.5}, "flag_below", "between 0 and 1, got 1.5"),
        ({"flag_below": "low"}, "flag_below", "must be a number, got 'low'"),
        ({"flag_below": True}, "flag_below", "must be a number, got a boolean"),
        ({"flag_below": float("nan")}, "flag_below", "between 0 and 1"),
        ({"scores": True, "format": "html"}, "scores", "given for format 'text' only"),
        ({"flag_below": 0.5, "format": "html"}, "flag_below", "given for format 'text' only"),
    ],
)
def test_bad_score_fields_are_named(fields: dict, field: str, message: str) -> None:
    with pytest.raises(ApiError) as err:
        parse_request(
            {"q": "a", "source": "en", "target": "de", **fields},
            ("en", "de"),
            SearchConfig(),
            ServeConfig(),
        )
    assert (err.value.status, err.value.field) == (400, field) and message in str(err.value)


def test_form_fields_are_text(service: Service) -> None:
    fields = {"q": "a", "source": "en", "target": "de", "flag_below": "0.25", "scores": "false"}
    checked = parse_request(fields, ("en", "de"), SearchConfig(), ServeConfig())
    assert checked.flag_below == 0.25 and checked.scores and checked.search.scores
    status, answer = post(service, {"q": "a", "scores": "yes"})
    assert status == 400 and answer["field"] == "scores"
