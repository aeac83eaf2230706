"""`mtkit serve` as a real process on 127.0.0.1: concurrent clients get exactly what
`mtkit translate` gives, bad requests get their 4xx alongside, and the limits, the API key and
SIGTERM behave as documented."""

from __future__ import annotations

import signal
import threading
import time
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from click.testing import CliRunner
from serve_helpers import FAST, Reply, Server, best, sentences, translated

from mtkit.cli import cli

SENTENCES = sentences(200)


def good_requests(ckpt: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(request, expected answer) for the 200 sentences: single sentences with the server's
    search, beam 1, or 1 alternative; lists of three; texts of two lines."""
    plain, greedy = best(ckpt, SENTENCES), best(ckpt, SENTENCES, "--beam", "1")
    nbest = translated(ckpt, tuple(SENTENCES), "--nbest", "2")
    cases = []
    for i, line in enumerate(SENTENCES[:140]):
        if i % 4 == 1:
            cases.append(({"q": line, "beam": 1}, {"translatedText": greedy[i]}))
        elif i % 4 == 2:
            answer = {"translatedText": nbest[i][0], "alternatives": [nbest[i][1]]}
            cases.append(({"q": line, "alternatives": 1}, answer))
        else:
            cases.append(({"q": line}, {"translatedText": plain[i]}))
    for i in range(140, 170, 3):
        cases.append(({"q": SENTENCES[i : i + 3]}, {"translatedText": plain[i : i + 3]}))
    for i in range(170, 200, 2):
        text = f"{SENTENCES[i]}\n{SENTENCES[i + 1]}"
        cases.append(({"q": text}, {"translatedText": f"{plain[i]}\n{plain[i + 1]}"}))
    return cases


def run_clients(server: Server, cases: list, clients: int, send: Callable | None = None) -> list:
    """Every case sent by ``clients`` concurrent clients; the replies, in case order."""
    send = send or (lambda case: server.translate(case[0]))
    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(send, cases))


@pytest.fixture(scope="module")
def server(ckpt: str, tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("log") / "server.log"
    started = Server(
        ckpt,
        log,
        "--max-body-bytes",
        "4000",
        "--max-chars",
        "1000",
        "--max-lines",
        "20",
        "--slice-tokens",
        "32",
    )
    yield started
    assert started.stop() == 0, started.stderr()


def test_concurrent_clients_get_what_translate_gives(server: Server, ckpt: str) -> None:
    cases = good_requests(ckpt)
    replies = run_clients(server, cases, clients=32)
    for (request, expected), reply in zip(cases, replies, strict=True):
        assert (reply.status, reply.body) == (200, expected), request
    health = server.get("/health").body
    assert health["batches"] < len(cases)  # requests were batched together
    assert "POST /translate 200" in server.stderr() and "lines=" in server.stderr()
    assert "http: httptools, event loop: uvloop" in server.stderr()  # the serve extra's


def test_the_http_stack_falls_back_to_pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from mtkit.pipeline import serve

    assert serve.http_stack() == ("httptools", "uvloop")
    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "uvloop" else found(name)
    )
    assert serve.http_stack() == ("httptools", "asyncio")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert serve.http_stack() == ("h11", "asyncio")


BAD: list[tuple[bytes, dict[str, str], int, str]] = [
    # (body, headers, status, field named)
    (b'{"q": "a man", "source": "en"', {}, 400, "body"),  # malformed JSON
    (b'{"q": "a \xff man", "source": "en", "target": "de"}', {}, 400, "body"),  # invalid UTF-8
    (b'["a man"]', {}, 400, "body"),  # not an object
    (b'{"q": 7, "source": "en", "target": "de"}', {}, 400, "q"),
    (b'{"q": ["a", 2], "source": "en", "target": "de"}', {}, 400, "q"),
    (b'{"source": "en", "target": "de"}', {}, 400, "q"),
    (b'{"q": "a", "source": "fr", "target": "de"}', {}, 400, "source"),
    (b'{"q": "a", "source": "en", "target": "fr"}', {}, 400, "target"),
    (b'{"q": "a", "source": "en", "target": "de", "alternatives": 5}', {}, 400, "alternatives"),
    (b'{"q": "a", "source": "en", "target": "de", "alternatives": "x"}', {}, 400, "alternatives"),
    (b'{"q": "a", "source": "en", "target": "de", "beam": 0}', {}, 400, "beam"),
    (b'{"q": "a", "source": "en", "target": "de", "format": "markdown"}', {}, 400, "format"),
    (
        b'{"q": "<p>a</p>", "source": "en", "target": "de", "format": "html", "alternatives": 1}',
        {},
        400,
        "alternatives",
    ),
    (b'{"q": "' + b"a\\n" * 30 + b'", "source": "en", "target": "de"}', {}, 400, "q"),  # lines
    (b'{"q": "' + b"a " * 600 + b'", "source": "en", "target": "de"}', {}, 400, "q"),  # chars
    (b'{"q": "' + b"a" * 5000 + b'", "source": "en", "target": "de"}', {}, 413, "body"),
    # text that is not text, and bodies that no parser reads (a 500 with a traceback once)
    (b'{"q": "a \\ud800", "source": "en", "target": "de"}', {}, 400, "q"),
    (b'{"q": ["a", "\\udfff"], "source": "en", "target": "de"}', {}, 400, "q"),
    (b'{"q": "a", "source": "\\ud800", "target": "de"}', {}, 400, "source"),
    (b'{"q": "a", "source": "en", "target": "de", "beam": "\xc2\xb2"}', {}, 400, "beam"),
    (b"[" * 1500 + b"]" * 1500, {}, 400, "body"),  # deeper than Python's recursion limit
    (b"q=a&source=en&target=de", {"Content-Type": "multipart/form-data; boundary=x"}, 400, "body"),
    (b"", {"Content-Type": "application/x-www-form-urlencoded"}, 400, "q"),  # no fields at all
]


def send_bad(server: Server, case: tuple) -> tuple[Reply, int, str]:
    body, headers, status, field = case
    reply = server.request(
        "POST", "/translate", body, {"Content-Type": "application/json", **headers}
    )
    return reply, status, field


def test_bad_and_long_requests_beside_good_ones(server: Server, ckpt: str):
    """Requests to refuse get their 4xx and long texts (sliced beside the short requests)
    their translation, while 16 clients send single sentences: every answer as `mtkit
    translate` gives it, no 5xx, no traceback."""
    cases = good_requests(ckpt)[::2]
    bad_replies: list = []

    long = " ".join(SENTENCES[:60])[:990]  # one line, far more than the model's 31 pieces
    long_replies: list = []

    def bad_clients() -> None:
        with ThreadPoolExecutor(8) as pool:
            bad_replies.extend(pool.map(lambda case: send_bad(server, case), BAD * 4))
            long_replies.extend(pool.map(lambda _: server.translate({"q": long}), range(4)))

    thread = threading.Thread(target=bad_clients)
    thread.start()
    replies = run_clients(server, cases, clients=16)
    thread.join(60)
    for (request, expected), reply in zip(cases, replies, strict=True):
        assert (reply.status, reply.body) == (200, expected), request
    (expected_long,) = best(ckpt, [long], "--split-sentences")
    assert [(r.status, r.body) for r in long_replies] == [
        (200, {"translatedText": expected_long})
    ] * 4
    assert len(bad_replies) == len(BAD) * 4
    for reply, status, field in bad_replies:
        assert (reply.status, reply.body["field"]) == (status, field), reply.body
        assert reply.body["error"].startswith(f"{field}: ")
    assert server.get("/health").status == 200 and server.proc.poll() is None
    assert "Traceback" not in server.stderr()


def test_languages_page_and_docs(server: Server) -> None:
    languages = server.get("/languages")
    assert languages.body == [
        {"code": "en", "name": "English", "targets": ["de"]},
        {"code": "de", "name": "German", "targets": []},
    ]
    page = server.get("/")
    assert page.status == 200 and 'id="translate"' in page.body and "http" not in page.body
    assert server.get("/openapi.json").body["paths"]["/translate"]["post"]
    assert server.get("/docs").status == 200
    reply = server.request(
        "POST",
        "/translate",
        b"q=a+man&source=auto&target=de",
        {"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert reply.status == 200 and reply.body["detectedLanguage"]["language"] == "en"


# A slow server: every output is forced to 60 tokens, so requests of many lines take a while
# (and no decoding guard, which would flag such outputs and add its field to the answers)
SLOW = ["--min-len", "60", "--max-len-b", "60", "--no-guard", "--max-wait-ms", "0"]
SLOW += ["--max-batch-tokens", "64"]


def heavy(n: int = 40, offset: int = 0) -> dict[str, Any]:
    return {"q": SENTENCES[offset : offset + n], "beam": 4}


def test_a_full_queue_answers_503_with_retry_after(start_server: Callable) -> None:
    server = start_server(*SLOW, "--queue-size", "1")
    replies = run_clients(
        server, [heavy(offset=i) for i in range(16)], clients=16, send=server.translate
    )
    statuses = sorted(reply.status for reply in replies)
    assert set(statuses) == {200, 503}, statuses
    for reply in replies:
        if reply.status == 503:
            assert reply.headers["retry-after"] == "1" and reply.body["field"] == "queue"
    assert server.translate({"q": "a man"}).status == 200  # and it goes on
    assert server.stop() == 0


def test_a_late_answer_is_a_504(start_server: Callable) -> None:
    server = start_server(*SLOW, "--timeout", "0.3")
    replies = run_clients(
        server, [heavy(offset=i) for i in range(8)], clients=8, send=server.translate
    )
    late = [reply for reply in replies if reply.status == 504]
    assert late and {reply.status for reply in replies} <= {200, 504}
    assert late[0].body == {
        "error": "timeout: no translation within 0.3 s (--timeout)",
        "field": "timeout",
    }
    # the server goes on: once the worker is past the late batches (seconds on a loaded
    # machine, where even a short request can miss 0.3 s), a request is answered
    deadline = time.monotonic() + 30
    while (reply := server.translate({"q": "a man"})).status == 504:
        assert time.monotonic() < deadline, "still timing out 30 s after the late batches"
        time.sleep(0.2)
    assert reply.status == 200
    assert server.stop() == 0


def test_the_api_key(start_server: Callable, ckpt: str) -> None:
    server = start_server(env={"MTKIT_API_KEY": "s3cret"})
    missing, wrong = server.translate({"q": "a man"}), server.translate({"q": "a", "api_key": "x"})
    assert (missing.status, missing.body["field"]) == (401, "api_key")
    assert (wrong.status, wrong.body["error"]) == (403, "api_key: invalid API key")
    bearer = server.translate({"q": "a man"}, {"Authorization": "Bearer s3cret"})
    in_body = server.translate({"q": "a man", "api_key": "s3cret"})
    expected = best(ckpt, ["a man"])[0]
    assert bearer.body == in_body.body == {"translatedText": expected}
    assert server.translate({"q": "a"}, {"X-API-Key": "nope"}).status == 403
    assert server.get("/health").status == 200 and server.get("/languages").status == 200
    assert server.stop() == 0


def test_sigterm_answers_requests_in_flight_then_exits_0(start_server: Callable, ckpt: str):
    server = start_server(*SLOW)
    cases = [heavy(20, offset=20 * i) for i in range(10)]
    with ThreadPoolExecutor(len(cases)) as pool:
        futures = [pool.submit(server.translate, case) for case in cases]
        time.sleep(0.15)  # all sent; the first batches are being translated
        assert not all(future.done() for future in futures)
        start = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        replies = [future.result(60) for future in futures]
    assert server.proc.wait(30) == 0, server.stderr()
    assert time.monotonic() - start < 30
    expected = best(ckpt, SENTENCES, *SLOW[:5], "--beam", "4")
    for i, reply in enumerate(replies):
        assert (reply.status, reply.body) == (
            200,
            {"translatedText": expected[20 * i : 20 * i + 20]},
        )
    assert "stopped by SIGTERM" in server.stderr()
    assert server.get("/health").status == 0  # no longer listening


def test_a_text_of_sentences_comes_back_whole_as_translate_splits_it(server: Server, ckpt: str):
    one = ". ".join(s.capitalize() for s in SENTENCES[:3]) + "!"  # three sentences on a line
    two = "  " + ". ".join(s.capitalize() for s in SENTENCES[3:5]) + "?"
    merged = f"{SENTENCES[5]} {SENTENCES[6].capitalize()} {SENTENCES[7]}"  # no full stop: recut
    split = best(ckpt, [one, two, merged], "--split-sentences")
    assert len(split[0].split()) > len(best(ckpt, [one])[0].split())  # more than one sentence
    reply = server.translate({"q": f"{one}\r\n\r\n{two}"})
    assert (reply.status, reply.body) == (200, {"translatedText": f"{split[0]}\r\n\r\n{split[1]}"})
    assert server.translate({"q": merged}).body == {"translatedText": split[2]}
    reply = server.translate({"q": [one, two], "split": False})
    assert (reply.status, reply.body) == (200, {"translatedText": best(ckpt, [one, two])})
    form = urllib.parse.urlencode(
        {"q": f"{one}\n{two}", "source": "en", "target": "de", "split": "false"}
    )
    reply = server.request(
        "POST", "/translate", form.encode(), {"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert (reply.status, reply.body) == (
        200,
        {"translatedText": "\n".join(best(ckpt, [one, two]))},
    )
    form = urllib.parse.urlencode({"q": f"{one}\n{two}", "source": "en", "target": "de"})
    reply = server.request(
        "POST", "/translate", form.encode(), {"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert (reply.status, reply.body) == (200, {"translatedText": f"{split[0]}\n{split[1]}"})


def test_an_html_post_comes_back_with_its_tags_as_translate_gives_it(server: Server, ckpt: str):
    words = SENTENCES[8].split()
    post = (
        f'<p>{" ".join(words[:2])} <a href="https://x.org/@bob?a=1&amp;b=2" '
        f'class="mention">@bob</a> <b>{" ".join(words[2:])}</b>. {SENTENCES[9].capitalize()}.'
        f"</p><p>See https://x.org/a for #more 😀<br>{SENTENCES[10]}</p>"
    )
    result = CliRunner().invoke(
        cli, ["translate", "-m", ckpt, *FAST, "-q", "--format", "html"], input=post
    )
    assert result.exit_code == 0, result.output
    reply = server.translate({"q": [post], "format": "html"})
    assert (reply.status, reply.body) == (200, {"translatedText": [result.stdout]})
    out = result.stdout
    for kept in (
        '<a href="https://x.org/@bob?a=1&amp;b=2" class="mention">',
        "@bob</a>",
        "<b>",
        "</b>",
        "https://x.org/a",
        "#more",
        "😀",
        "<br>",
    ):
        assert out.count(kept) == 1, (kept, out)
    assert out.startswith("<p>") and out.count("<p>") == out.count("</p>") == 2
