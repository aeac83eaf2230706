"""`mtkit serve` as a real process takes every request LibreTranslate takes: JSON, forms,
multipart forms and query strings give the JSON answer; text that is not text is refused by
name; pages of other origins may call it (CORS); --rate-limit answers 429 with Retry-After; and
no client's mistake leaves a traceback in the log."""

from __future__ import annotations

import socket
import time
import urllib.parse
from typing import Any

import pytest
from serve_helpers import Server, multipart

from mtkit.config import ServeConfig
from mtkit.errors import MtkitError

TEXTS = ["a man sits on the street", "the dog plays with a ball"]
ORIGIN = "https://editor.example"


@pytest.fixture(scope="module")
def server(ckpt: str, tmp_path_factory: pytest.TempPathFactory):
    started = Server(ckpt, tmp_path_factory.mktemp("requests") / "server.log")
    yield started
    assert started.stop() == 0, started.stderr()
    assert "Traceback" not in started.stderr()


@pytest.fixture(scope="module")
def limited(ckpt: str, tmp_path_factory: pytest.TempPathFactory):
    """Two requests a minute, an API key, and CORS for one origin."""
    log = tmp_path_factory.mktemp("limited") / "server.log"
    started = Server(
        ckpt,
        log,
        "--rate-limit",
        "2",
        "--cors-origins",
        f"{ORIGIN},https://b.example",
        env={"MTKIT_API_KEY": "s3cret"},
    )
    yield started
    assert started.stop() == 0, started.stderr()
    assert "Traceback" not in started.stderr()


def post(server: Server, path: str, body: bytes, content_type: str | None, **headers: str):
    typed = {"Content-Type": content_type} if content_type else {}
    return server.request("POST", path, body, {**typed, **headers})


def test_forms_multipart_forms_and_query_strings_get_the_json_answer(server: Server) -> None:
    fields: dict[str, Any] = {
        "q": TEXTS,
        "source": "en",
        "target": "de",
        "alternatives": 1,
        "split": False,
    }
    answer = server.translate(fields)
    assert answer.status == 200 and len(answer.body["alternatives"]) == 2, answer.body
    texts = {**fields, "alternatives": "1", "split": "false"}  # as a form sends them
    query = urllib.parse.urlencode(texts, doseq=True)  # q repeated: a list
    form = "application/x-www-form-urlencoded"
    parts = [
        ("q", TEXTS[0]),
        ("q", TEXTS[1]),
        ("source", "en"),
        ("target", "de"),
        ("alternatives", "1"),
        ("split", "false"),
    ]
    body = multipart(*parts, ("file", "ignored.txt", b"a file part is no field"))
    source_fr = query.replace("source=en", "source=fr")
    json_body = b'{"q": ["a man sits on the street", "the dog plays with a ball"], "source": "en"}'
    replies = {
        "form": post(server, "/translate", query.encode(), form),
        "multipart": post(server, "/translate", body, "multipart/form-data; boundary=b0und"),
        "query, no body": post(server, f"/translate?{query}", b"", None),
        "query, empty JSON body": post(server, f"/translate?{query}", b"", "application/json"),
        # LibreTranslate's precedence: the query string wins over a form, a JSON body wins
        "query over form": post(server, "/translate?source=en", source_fr.encode(), form),
        "JSON over query": post(server, f"/translate?{source_fr}", json_body, "application/json"),
    }
    for how, reply in replies.items():
        assert (reply.status, reply.body) == (200, answer.body), how


def test_text_that_is_not_text_is_a_400_naming_the_field(server: Server) -> None:
    rows = [
        ({"q": "\ud800 a man"}, "q", "q: holds an unpaired surrogate (U+D800) at character 0"),
        (
            {"q": ["a man", "a \udfff"]},
            "q",
            "q: item 1 holds an unpaired surrogate (U+DFFF) at character 2",
        ),
        ({"q": "a", "source": "e\udc00"}, "source", "(U+DC00) at character 1"),
        ({"q": "a", "format": "\ud83d"}, "format", "(U+D83D) at character 0"),
        ({"q": "a", "api_key": "\ud800"}, "api_key", "(U+D800) at character 0"),
    ]
    for fields, field, says in rows:
        reply = server.translate(fields)  # json.dumps sends "\ud800" as its escape
        assert (reply.status, reply.body["field"]) == (400, field), reply.body
        assert reply.body["error"].startswith(f"{field}: ") and says in reply.body["error"]
    percent = post(server, "/translate?q=%ED%A0%80&source=en&target=de", b"", None)
    assert (percent.status, percent.body["field"]) == (400, "query")  # UTF-8 cannot say it
    pair = server.translate({"q": "a man \ud83d\ude00"})  # a surrogate pair is an emoji
    assert pair.status == 200 and "😀" in pair.body["translatedText"]
    assert "Traceback" not in server.stderr()


def test_a_client_that_leaves_before_its_body_leaves_no_traceback(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
        conn.sendall(
            b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
            b'application/json\r\nContent-Length: 100\r\n\r\n{"q": '
        )
        time.sleep(0.1)
    deadline = time.monotonic() + 10
    while "POST /translate 400" not in server.stderr():
        assert time.monotonic() < deadline, server.stderr()
        time.sleep(0.05)
    assert "Traceback" not in server.stderr() and server.get("/health").status == 200


def test_pages_of_any_origin_may_call_every_route(server: Server) -> None:
    cross = {"Origin": ORIGIN}
    replies = [
        server.translate({"q": "a man"}, cross),
        server.translate({"q": 7}, cross),
        server.request("GET", "/languages", headers=cross),
        server.request("GET", "/health", headers=cross),
    ]
    assert [reply.status for reply in replies] == [200, 400, 200, 200]
    for reply in replies:
        assert reply.headers["access-control-allow-origin"] == "*"
        assert reply.headers["access-control-expose-headers"] == "Retry-After"
    preflight = server.request(
        "OPTIONS",
        "/translate",
        headers={
            **cross,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, x-api-key",
        },
    )
    assert preflight.status == 200
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert preflight.headers["access-control-allow-methods"] == "GET, POST"
    assert (
        preflight.headers["access-control-allow-headers"]
        == "authorization, content-type, x-api-key"
    )
    assert int(preflight.headers["access-control-max-age"]) > 0
    assert "access-control-allow-origin" not in server.translate({"q": "a man"}).headers


def test_cors_origins_restricts_the_origins(limited: Server) -> None:
    asks = {"Access-Control-Request-Method": "POST"}
    for origin, status in [(ORIGIN, 200), ("https://b.example", 200), ("https://c.example", 400)]:
        preflight = limited.request("OPTIONS", "/translate", headers={"Origin": origin, **asks})
        assert preflight.status == status, origin
        assert preflight.headers.get("access-control-allow-origin") == (
            origin if status == 200 else None
        )
    other = limited.request("GET", "/languages", headers={"Origin": "https://c.example"})
    assert other.status == 200 and "access-control-allow-origin" not in other.headers


def test_a_rate_limit_answers_429_with_retry_after(limited: Server) -> None:
    key = {"Authorization": "Bearer s3cret"}
    replies = [
        limited.translate({"q": "a man"}, key),
        limited.translate({"q": "a", "api_key": "s3cret"}),  # the key in the body
        limited.translate({"q": "a man"}, {**key, "Origin": ORIGIN}),
    ]
    assert [reply.status for reply in replies] == [200, 200, 429]
    late = replies[2]
    wait = int(late.headers["retry-after"])
    assert 1 <= wait <= 30  # a token every 30 s
    assert late.body == {
        "field": "api_key",
        "error": f"api_key: more than 2 requests a minute (--rate-limit); try again in {wait} s",
    }
    assert late.headers["access-control-allow-origin"] == ORIGIN  # a page can read Retry-After
    assert late.headers["access-control-expose-headers"] == "Retry-After"
    # a wrong or missing key is paid by the client's address: guessing keys is limited too
    guesses = [
        limited.translate({"q": "a"}, {"X-API-Key": "guess"}),
        limited.translate({"q": "a"}),
        limited.translate({"q": "a", "api_key": "guess"}),
    ]
    assert [(r.status, r.body["field"]) for r in guesses] == [
        (403, "api_key"),
        (401, "api_key"),
        (429, "client"),
    ]
    # behind a reverse proxy on this machine, uvicorn takes the client from X-Forwarded-For
    proxied = limited.translate({"q": "a"}, {"X-Forwarded-For": "203.0.113.7"})
    assert (proxied.status, proxied.body["field"]) == (401, "api_key")
    assert limited.get("/languages").status == 200 and limited.get("/health").status == 200


@pytest.mark.parametrize(
    "origins, kept",
    [
        (["*"], ["*"]),
        ([""], []),
        (
            [" https://a.org", "chrome-extension://abcdef"],
            ["https://a.org", "chrome-extension://abcdef"],
        ),
    ],
)
def test_cors_origins_are_origins(origins: list[str], kept: list[str]) -> None:
    assert ServeConfig(cors_origins=origins).cors_origins == kept
    assert ServeConfig().cors_origins == ["*"]
    for wrong in ("https://a.org/", "a.org", "https://a.org/app"):
        with pytest.raises(MtkitError, match=f"--cors-origins: {wrong} is not an origin"):
            ServeConfig(cors_origins=[wrong])
