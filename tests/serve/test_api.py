"""Request checks and answers without HTTP, and where a server's language pair comes from."""

from __future__ import annotations

import pytest
from serve_helpers import multipart

from mtkit.config import SearchConfig, ServeConfig, TranslateConfig
from mtkit.engines import load_engine
from mtkit.errors import MtkitError
from mtkit.languages import Languages
from mtkit.serve.api import build_response, parse_request, split_lines
from mtkit.serve.bodies import FilePart, decode_body, decode_request, multipart_form
from mtkit.serve.errors import ApiError
from mtkit.serve.languages import resolve_languages

PAIR = ("en", "de")


def parse(**fields):
    return parse_request(
        {"source": "en", "target": "de", **fields},
        PAIR,
        SearchConfig(),
        ServeConfig(max_chars=50, max_lines=4),
    )


@pytest.mark.parametrize(
    "text, lines",
    [
        ("a", ["a"]),
        ("a\nb", ["a", "b"]),
        ("a\r\nb\r", ["a", "b"]),
        ("", [""]),
        ("a\n", ["a", ""]),
        ("a\rb", ["a\rb"]),
    ],
)
def test_split_lines(text: str, lines: list[str]) -> None:
    assert split_lines(text) == lines


@pytest.mark.parametrize(
    "body, content_type, fields",
    [
        (b'{"q": "x"}', "application/json", {"q": "x"}),
        (b'{"q": "x"}', "application/x-www-form-urlencoded", {"q": "x"}),  # curl -d '{...}'
        (
            b"q=a+b&q=c&alternatives=2",
            "application/x-www-form-urlencoded",
            {"q": ["a b", "c"], "alternatives": "2"},
        ),
    ],
)
def test_decode_body(body: bytes, content_type: str, fields: dict) -> None:
    assert decode_body(body, content_type) == fields


MULTI = "multipart/form-data; boundary=b0und"
FORM = "application/x-www-form-urlencoded"
FIELDS = {"q": ["a b", "c\r\nd"], "source": "en", "target": "de", "beam": "3"}
MULTI_BODY = multipart(
    ("q", "a b"),
    ("q", "c\r\nd"),
    ("source", "en"),
    ("target", "de"),
    ("beam", "3"),
    ("file", "doc.txt", b"\xff not a field"),
)


@pytest.mark.parametrize(
    "body, content_type, query, fields",
    [
        (b"", "", b"q=a+b&q=c%0D%0Ad&source=en&target=de&beam=3", FIELDS),  # the query alone
        (b"  ", "application/json", "q=a+b&q=c%0D%0Ad&source=en&target=de&beam=3", FIELDS),
        (b"q=a+b&q=c%0D%0Ad&source=fr&beam=3", FORM, b"source=en&target=de", FIELDS),
        (MULTI_BODY, MULTI, b"", FIELDS),
        (multipart(("q", "x"), ("beam", "5")), MULTI, b"beam=3", {"q": "x", "beam": "3"}),
        # the query string wins over a form, as LibreTranslate's request.values; a JSON body wins
        (b"q=x&beam=5", FORM, b"beam=3", {"q": "x", "beam": "3"}),
        (
            b'{"q": "x", "beam": 5}',
            "application/json",
            b"beam=3&alternatives=1",
            {"q": "x", "beam": 5, "alternatives": "1"},
        ),
        (b'{"q": "x", "beam": 5}', FORM, b"beam=3", {"q": "x", "beam": 5}),  # curl -d '{...}'
        (b'{"q": "x"}', "", b"", {"q": "x"}),
    ],
)
def test_decode_request(body: bytes, content_type: str, query: bytes | str, fields: dict) -> None:
    assert decode_request(body, content_type, query) == fields


def test_every_encoding_makes_the_same_request() -> None:
    json_body = b'{"q": ["a b", "c\\r\\nd"], "source": "en", "target": "de", "beam": 3}'
    checked = [
        parse_request(
            decode_request(body, content_type, query), PAIR, SearchConfig(), ServeConfig()
        )
        for body, content_type, query in [
            (json_body, "application/json", b""),
            (MULTI_BODY, MULTI, b""),
            (b"", "", b"q=a+b&q=c%0D%0Ad&source=en&target=de&beam=3"),
        ]
    ]
    assert checked[0] == checked[1] == checked[2]
    assert checked[0].texts == ["a b", "c\r\nd"] and checked[0].search.beam == 3


def test_a_multipart_forms_files_are_not_fields() -> None:
    fields, uploads = multipart_form(MULTI_BODY, MULTI)
    assert fields == FIELDS
    assert uploads == [FilePart("file", "doc.txt", "text/plain", b"\xff not a field")]


@pytest.mark.parametrize(
    "body, content_type, query, field, says",
    [
        (
            b'{"q": "\\ud800 a"}',
            "application/json",
            b"",
            "q",
            "q: holds an unpaired surrogate (U+D800) at character 0",
        ),
        (
            b'{"q": ["a", "b \\udfff"]}',
            "",
            b"",
            "q",
            "q: item 1 holds an unpaired surrogate (U+DFFF) at character 2",
        ),
        (b'{"q": "a", "target": "\\udc00"}', "", b"", "target", "unpaired surrogate (U+DC00)"),
        (b'{"q": "a", "api_key": "k\\ud83d"}', "", b"", "api_key", "(U+D83D) at character 1"),
        (b'{"q\\ud800": "a"}', "", b"", "body", "body: a field name holds an unpaired"),
        (b"", "", b"q=%ED%A0%80", "query", "invalid UTF-8 in a percent-encoded value"),
        (b"q=%ED%A0%80", FORM, b"", "body", "invalid UTF-8 in a percent-encoded value"),
        (b"", "", b"q=\xff", "query", "query: invalid UTF-8 (byte 0xff at byte 2)"),
        (
            multipart(("q", "\udfff".encode("utf-8", "surrogatepass"))),
            MULTI,
            b"",
            "q",
            "q: invalid UTF-8 (byte 0xed at byte 0)",
        ),
        (multipart(("q", "a")), "multipart/form-data", b"", "body", "without a boundary"),
        (b"--other\r\n", MULTI, b"", "body", "body: malformed multipart/form-data"),
        (b"[" * 5000 + b"]" * 5000, "application/json", b"", "body", "JSON nested too deeply"),
        (b'{"beam": 1' + b"0" * 5000 + b"}", "", b"", "body", "unreadable JSON (Exceeds the limit"),
        (b'{"q": "a"', "", b"q=x", "body", "malformed JSON (Expecting ',' delimiter"),
    ],
)
def test_undecodable_requests_name_the_field(
    body: bytes, content_type: str, query: bytes, field: str, says: str
) -> None:
    with pytest.raises(ApiError) as caught:
        decode_request(body, content_type, query)
    assert (caught.value.status, caught.value.field) == (400, field)
    assert says in str(caught.value), caught.value


def test_a_valid_surrogate_pair_is_text() -> None:
    assert decode_request(b'{"q": "\\ud83d\\ude00"}', "application/json") == {"q": "\U0001f600"}


def test_a_request_becomes_texts_and_a_search() -> None:
    checked = parse(q=["a b\nc", "d"], alternatives=2, beam=3)
    assert (checked.texts, checked.many) == (["a b\nc", "d"], True)
    assert checked.search == SearchConfig(beam=3, nbest=3)
    assert parse(q="x", alternatives="1").search == SearchConfig(nbest=2)  # a form's text


@pytest.mark.parametrize(
    "fields, field, says",
    [
        ({"q": "x" * 51}, "q", "51 characters, more than the limit of 50"),
        ({"q": "a\nb\nc\nd\ne"}, "q", "5 lines, more than the limit of 4"),
        ({"q": "x", "source": "fr"}, "source", "this server translates en-de only, not fr-de"),
        ({"q": "x", "alternatives": 5}, "alternatives", "must be between 0 and 4, got 5"),
        ({"q": "x", "beam": 2, "alternatives": 2}, "alternatives", "between 0 and 1, got 2"),
        ({"q": "x", "beam": True}, "beam", "must be an integer, got a boolean"),
        ({"q": None}, "q", "must be a string or a list of strings, got null"),
        ({"q": "x", "target": 3}, "target", "must be a string, got a number"),
        ({"q": "x", "beam": "\u00b2"}, "beam", "must be an integer, got a string"),
    ],  # not 0-9
)
def test_refusals_name_the_field(fields: dict, field: str, says: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse(**fields)
    assert caught.value.status == 400 and caught.value.field == field
    assert says in str(caught.value) and str(caught.value).startswith(f"{field}: ")


def auto(**fields):
    return parse_request(
        {"source": "auto", "target": "de", **fields}, PAIR, SearchConfig(), ServeConfig()
    )


def test_answers_in_libretranslates_shapes() -> None:
    many = auto(q=["a\nb", "A man in a red shirt rides a bike."], alternatives=1)
    assert build_response(many, ["A1\n", "C1"], [["A2\n"], ["C2"]]) == {
        "translatedText": ["A1\n", "C1"],
        "alternatives": [["A2\n"], ["C2"]],
        "detectedLanguage": [
            {"confidence": 0.7, "language": "en"},  # too short to tell
            {"confidence": 85.4, "language": "en"},
        ],
    }
    one = auto(q="😀 https://x.org")  # no letters: the source, confidence 0
    assert build_response(one, ["C1"], [[]]) == {
        "translatedText": "C1",
        "detectedLanguage": {"confidence": 0.0, "language": "en"},
    }
    assert build_response(parse(q="c"), ["C1"], [[]]) == {"translatedText": "C1"}


@pytest.mark.parametrize(
    "fields, says",
    [
        (
            {"q": ["A man rides a bike.", "Une femme en robe rouge marche dans la rue."]},
            "q: item 1 is in French (fr); this server translates en-de only",
        ),
        (
            {"q": "Une femme en robe rouge marche dans la rue."},
            "q: the text is in French (fr); this server translates en-de only",
        ),
        (
            {"q": ["<p>Ein Mann <b>fährt</b> Fahrrad.</p>"], "format": "html"},
            "q: item 0 is in German (de); this server translates en-de only",
        ),
        ({"q": "Auto zaparkované na pláži a pes."}, "q: the text is in sk; this server"),
    ],
)
def test_auto_refuses_a_text_in_another_language(fields: dict, says: str) -> None:
    with pytest.raises(ApiError) as caught:
        auto(**fields)
    assert caught.value.status == 400 and str(caught.value).startswith(says)


def test_auto_identifies_html_on_its_text() -> None:
    english_tags = '<p class="a man in a red shirt rides a bike down the street">{}</p>'
    german = english_tags.format("Ein Mann fährt Fahrrad.")
    with pytest.raises(ApiError, match="^q: item 0 is in German"):
        auto(q=[german], format="html")
    english = english_tags.format("A man in a red shirt <b>rides</b> a bike.")
    assert auto(q=[english], format="html").detected == [("en", 85.4)]
    assert auto(q=[german]).detected == [("en", 89.9)]  # read as text, tags and all


def test_languages_come_from_the_options_or_the_engine(ckpt: str) -> None:
    engine = load_engine([ckpt], TranslateConfig(device="cpu"))
    assert engine.languages() is None  # a checkpoint that names none
    assert resolve_languages(("en", "de"), engine, ckpt) == ("en", "de")
    with pytest.raises(MtkitError, match=f"^{ckpt}: .*give --source-lang and --target-lang"):
        resolve_languages(("", ""), engine, ckpt)
    engine.model_languages = Languages(("en",), ("de", "fr"))
    assert resolve_languages(("", ""), engine, ckpt) == ("en", "de,fr")
    assert resolve_languages(("cs", "uk"), engine, ckpt) == ("cs", "uk")


def test_a_multilingual_server_tags_each_line_with_the_target() -> None:
    pair, cfg = ("en", "de,fr,cs"), ServeConfig()
    checked = parse_request(
        {"q": "a b\n\n>>cs<< c", "source": "en", "target": "fr"}, pair, SearchConfig(), cfg
    )
    assert checked.tagged(split_lines(checked.texts[0])) == [">>fr<< a b", "", ">>cs<< c"]
    for target, field, says in [
        ("es", "target", "translates en-de,fr,cs only, not en-es"),
        ("de", "q", "unknown target-language tag >>xx<<"),
    ]:
        with pytest.raises(ApiError) as err:
            parse_request(
                {"q": ">>xx<< a", "source": "en", "target": target}, pair, SearchConfig(), cfg
            )
        assert err.value.field == field and says in str(err.value), err.value


@pytest.mark.parametrize(
    "value, split", [(None, True), (True, True), (False, False), ("false", False), ("1", True)]
)
def test_split_is_on_unless_turned_off(value: object, split: bool) -> None:
    fields = {} if value is None else {"split": value}
    assert parse(q="x", **fields).split is split


def test_split_must_be_a_boolean() -> None:
    with pytest.raises(ApiError, match="^split: must be true or false, got a number"):
        parse(q="x", split=2)
