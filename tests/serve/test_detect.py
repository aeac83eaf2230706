"""`mtkit serve` as a real process: ``"source": "auto"`` per text (Mastodon's request), POST
/detect (JSON and form, the API key) and GET /frontend/settings in LibreTranslate's shapes."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner
from serve_helpers import FAST, Reply, Server

from mtkit.cli import cli

# what Mastodon sends to translate a post: HTML, source "auto", no key
POSTS = [
    '<p>A man in a red shirt is riding a bike down the street with his <a href="https://'
    'example.social/@dog" class="mention">@dog</a>.</p>',
    "<p>Two women are sitting on a bench in the park.</p><p>#photo 😀</p>",
]
FRENCH = "Une femme en robe rouge marche dans la rue avec son chien."
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def server(ckpt: str, tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("log") / "server.log"
    started = Server(ckpt, log, "--max-chars", "1000")
    yield started
    assert started.stop() == 0, started.stderr()


def html_translation(ckpt: str, post: str) -> str:
    """`mtkit translate --format html` of one post."""
    result = CliRunner().invoke(
        cli, ["translate", "-m", ckpt, *FAST, "-q", "--format", "html"], input=post
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def detect(server: Server, fields: dict[str, Any], headers: dict[str, str] | None = None) -> Reply:
    body = json.dumps(fields).encode()
    return server.request("POST", "/detect", body, {**JSON, **(headers or {})})


def test_mastodons_request_gets_a_translation_and_a_language_per_post(server: Server, ckpt: str):
    request = {"q": POSTS, "source": "auto", "target": "de", "format": "html", "api_key": None}
    reply = server.translate(request)
    assert reply.status == 200, reply.body
    assert reply.body == {
        "translatedText": [html_translation(ckpt, post) for post in POSTS],
        "detectedLanguage": [
            {"confidence": 99.6, "language": "en"},
            {"confidence": 98.6, "language": "en"},
        ],
    }


def test_a_post_in_another_language_is_refused_by_name(server: Server) -> None:
    reply = server.translate(
        {"q": [POSTS[0], f"<p>{FRENCH}</p>"], "source": "auto", "format": "html"}
    )
    assert (reply.status, reply.body) == (
        400,
        {"error": "q: item 1 is in French (fr); this server translates en-de only", "field": "q"},
    )
    one = server.translate({"q": FRENCH, "source": "auto"})
    assert (one.status, one.body["error"]) == (
        400,
        "q: the text is in French (fr); this server translates en-de only",
    )
    short = server.translate({"q": ["Merci!", "😀 https://x.org"], "source": "auto"})
    assert short.status == 200 and short.body["detectedLanguage"] == [
        {"confidence": 1.2, "language": "en"},
        {"confidence": 0.0, "language": "en"},
    ]
    named = server.translate({"q": FRENCH, "source": "en"})  # no identification asked for
    assert named.status == 200 and "detectedLanguage" not in named.body


def test_detect_answers_the_best_three_from_json_or_a_form(server: Server) -> None:
    expected = [
        {"confidence": 99.8, "language": "fr"},
        {"confidence": 0.1, "language": "ht"},
        {"confidence": 0.0, "language": "oc"},
    ]
    assert detect(server, {"q": FRENCH}).body == expected
    form = server.request("POST", "/detect", urllib.parse.urlencode({"q": FRENCH}).encode(), FORM)
    assert (form.status, form.body) == (200, expected)
    curl = server.request("POST", "/detect", json.dumps({"q": FRENCH}).encode(), FORM)
    assert curl.body == expected  # `curl -d '{...}'`
    assert detect(server, {"q": "😀 12"}).body == [{"confidence": 0.0, "language": "en"}]
    assert detect(server, {"q": ""}).body == [{"confidence": 0.0, "language": "en"}]


@pytest.mark.parametrize(
    "body, content_type, status, error",
    [
        (b'{"text": "x"}', "application/json", 400, "q: missing (the text to detect)"),
        (b'{"q": ["a", "b"]}', "application/json", 400, "q: must be a string, got a list"),
        (b"q=a&q=b", "application/x-www-form-urlencoded", 400, "q: must be a string, got a list"),
        (
            b'{"q": "' + b"x" * 1001 + b'"}',
            "application/json",
            400,
            "q: 1001 characters, more than the limit of 1000",
        ),
        (b"[1]", "application/json", 400, "body: expected a JSON object, got a list"),
    ],
)
def test_detect_refusals_name_the_field(
    server: Server, body: bytes, content_type: str, status: int, error: str
) -> None:
    reply = server.request("POST", "/detect", body, {"Content-Type": content_type})
    assert (reply.status, reply.body["error"]) == (status, error)


def test_frontend_settings_in_libretranslates_shape(server: Server) -> None:
    reply = server.get("/frontend/settings")
    assert (reply.status, reply.body) == (
        200,
        {
            "charLimit": 1000,
            "frontendTimeout": 500,
            "apiKeys": False,
            "keyRequired": False,
            "suggestions": False,
            "filesTranslation": False,
            "supportedFilesFormat": [],
            "language": {
                "source": {"code": "en", "name": "English"},
                "target": {"code": "de", "name": "German"},
            },
        },
    )
    paths = server.get("/openapi.json").body["paths"]
    assert "post" in paths["/detect"] and "get" in paths["/frontend/settings"]


def test_detect_takes_the_api_key_as_translate_does(start_server: Callable) -> None:
    server = start_server(env={"MTKIT_API_KEY": "s3cret"})
    assert detect(server, {"q": FRENCH}).status == 401
    assert detect(server, {"q": FRENCH, "api_key": "x"}).body["error"] == "api_key: invalid API key"
    assert detect(server, {"q": FRENCH}, {"X-API-Key": "nope"}).status == 403
    for given in ({"api_key": "s3cret"}, {}):
        headers = {} if given else {"Authorization": "Bearer s3cret"}
        reply = detect(server, {"q": FRENCH, **given}, headers)
        assert reply.status == 200 and reply.body[0]["language"] == "fr"
    settings = server.get("/frontend/settings").body
    assert (settings["apiKeys"], settings["keyRequired"]) == (True, True)
    assert server.stop() == 0
