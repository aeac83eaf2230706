"""Glossaries in the server: a request's own terms, the server's --glossary, batching by kind."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the 'serve' extra: pip install -e '.[serve]'")

from asgi_helpers import post  # noqa: E402
from serve_helpers import FakeEngine, hold, started, texts  # noqa: E402

from mtkit.config import SearchConfig, ServeConfig, TranslateConfig  # noqa: E402
from mtkit.pipeline.serve import load_model  # noqa: E402
from mtkit.serve.service import Service  # noqa: E402
from mtkit.text import TextOptions, translate_texts  # noqa: E402
from mtkit.text.glossary import Glossary, constraining  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")
FLAT = {"device": "cpu", "threads": 1, "beam": 3, "max_len_a": 0.0, "max_len_b": 8}


class Recording(FakeEngine):
    """The fake engine, recording each call's constraints."""

    def __init__(self) -> None:
        super().__init__()
        self.phrases: list[list[list[str]] | None] = []

    def translate(self, lines, search=None, *args, constraints=None):  # type: ignore[override]
        self.phrases.append(None if constraints is None else [list(p) for p in constraints])
        return super().translate(lines, search)


def test_constrained_jobs_batch_together_each_line_with_its_own_phrases() -> None:
    engine = Recording()
    batcher = started(engine, max_tokens=100)
    try:
        gate = hold(engine, batcher)
        kind = SearchConfig(constraints="unordered")
        a = batcher.submit(["a cat", "a dog"], kind, [["Katze"], []])
        plain = batcher.submit(["a cow"], SearchConfig())
        b = batcher.submit(["a cat"], kind, [["Kater"]])
        engine.release.set()
        assert texts(a) == ["A CAT", "A DOG"] and texts(b) == ["A CAT"] and texts(plain)
        texts(gate)
    finally:
        batcher.close(5)
    calls = list(zip([lines for lines, _ in engine.calls], engine.phrases, strict=True))
    assert (["a cat", "a dog", "a cat"], [["Katze"], [], ["Kater"]]) in calls
    assert (["a cow"], None) in calls  # another kind: a batch of its own


@pytest.fixture(scope="module")
def service(ckpt: str) -> Iterator[Service]:
    config = TranslateConfig.from_flat(FLAT)
    serve = ServeConfig(source_lang="en", target_lang="de", max_wait_ms=100.0, max_glossary_terms=3)
    model = load_model([ckpt], config, serve)
    yield Service(serve, model)
    model.batcher.close(10)


def offline(service: Service, texts: list[str], glossary: Glossary | None) -> list[str]:
    """What `mtkit translate` gives (the same engine, the text layer, the glossary)."""
    engine = service.ready().engine
    search = engine.config.search.replace(constraints="unordered" if glossary else "")
    found = translate_texts(
        engine, texts, TextOptions("en"), search, constrain=constraining(glossary)
    )
    return [t.text for t in found]


TEXTS = ["A cat sits. A man runs.", "the dog plays"]


def test_a_requests_glossary_is_applied_as_offline(service: Service) -> None:
    pairs = [["cat", "red ball"], ["dog", "woman"]]
    status, answer = post(service, {"q": TEXTS, "glossary": pairs})
    assert status == 200, answer
    want = offline(service, TEXTS, Glossary([tuple(p) for p in pairs]))
    assert answer["translatedText"] == want
    assert "red ball" in want[0] and "woman" in want[1]
    status, plain = post(service, {"q": TEXTS})
    assert plain["translatedText"] == offline(service, TEXTS, None) != want


def test_concurrent_requests_keep_their_own_glossaries(service: Service) -> None:
    requests = [
        {"q": ["a cat sits", "the dog"], "glossary": [["cat", "street"]]},
        {"q": ["a cat sits", "the dog"], "glossary": [["cat", "house"]]},
        {"q": ["a cat sits", "the dog"]},
    ] * 2
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda fields: post(service, fields), requests))
    for fields, (status, answer) in zip(requests, answers, strict=True):
        assert status == 200, answer
        terms = Glossary([tuple(p) for p in fields["glossary"]]) if "glossary" in fields else None
        assert answer["translatedText"] == offline(service, fields["q"], terms)


def test_the_servers_glossary_applies_and_a_request_overrides_it(service: Service) -> None:
    model = service.ready()
    server = Service(
        service.config,
        replace(
            model,
            glossary=Glossary([("cat", "red ball")]),
            search=model.search.replace(constraints="unordered"),
        ),
    )
    status, answer = post(server, {"q": TEXTS})
    assert answer["translatedText"] == offline(service, TEXTS, Glossary([("cat", "red ball")]))
    status, answer = post(server, {"q": TEXTS, "glossary": [["cat", "woman"]]})
    assert answer["translatedText"] == offline(service, TEXTS, Glossary([("cat", "woman")]))


@pytest.mark.parametrize(
    ("glossary", "message"),
    [
        ({"cat": "Katze"}, "must be a list of [source, target] pairs, got an object"),
        ([["a", "b"]] * 4, "4 terms, more than the limit of 3 (--max-glossary-terms)"),
        ([["cat"]], "item 0 must be a [source, target] pair of strings"),
        ([["cat", 3]], "item 0 must be a [source, target] pair of strings"),
        ([["cat", " "]], "item 0: a glossary entry needs a source and a target term"),
        ([["x" * 201, "y"]], "item 0: a glossary term of 201 characters"),
    ],
)
def test_bad_glossaries_are_400s_naming_the_field(service: Service, glossary, message) -> None:
    status, answer = post(service, {"q": "a cat", "glossary": glossary})
    assert status == 400
    assert answer["error"].startswith("glossary: ") and message in answer["error"], answer


def test_unsatisfiable_terms_are_a_400(service: Service) -> None:
    long = " ".join(["red ball woman street house"] * 3)
    status, answer = post(service, {"q": "a cat", "glossary": [["cat", long]]})
    assert status == 400 and "its constraints need" in answer["error"], answer


def test_a_glossary_file_loads_with_the_server(ckpt: str, tmp_path: Path) -> None:
    path = tmp_path / "terms.tsv"
    path.write_text("cat\tred ball\n", encoding="utf-8")
    config = TranslateConfig.from_flat({**FLAT, "glossary": str(path)})
    model = load_model([ckpt], config, ServeConfig(source_lang="en", target_lang="de"))
    try:
        assert model.glossary is not None and model.glossary.targets("a cat") == ["red ball"]
        assert model.search.constraints == "unordered"
    finally:
        model.batcher.close(5)
