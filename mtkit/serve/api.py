"""LibreTranslate's request and response shapes, and every check on a request, without HTTP.

``POST /translate`` takes ``{"q": "text" or ["a", "b"], "source": "en", "target": "de",
"format": "text" or "html", "alternatives": N, "api_key": "..."}`` as JSON, as an HTML form, as
a multipart form or in the query string of the POST (:func:`decode_request`) and answers
``{"translatedText": "..."}`` (a list for a list), with ``"alternatives"`` (N more
translations from the n-best list) when asked. mtkit adds ``"beam"`` (an int) to choose the
beam per request, and ``"split"`` (a boolean, default true) to choose how a text is read.
Unknown fields are ignored, as LibreTranslate does. Text must be text: a JSON string holding a
lone surrogate (``"\\ud800"``), which no UTF-8 can carry, is refused naming its field.

With ``"split": true`` (the default) each text is cut into sentences (:mod:`mtkit.text`: line
breaks always end one), each sentence is translated on its own, and the translations are put
back into the text's own whitespace and line breaks (``\\r\\n`` and indentation kept). With
``"split": false`` each text is split on newlines only; every line is translated as one sentence
and the translations are joined with ``\\n`` again (a ``\\r`` before a newline is dropped, as
``mtkit translate`` does). A multilingual model's server (several target languages,
``en``-``de,fr,cs``: issue 16) takes any of them as ``"target"`` and puts its tag ``>>xx<<``
before every line (every sentence). ``"format": "html"``: each text is an HTML document or
fragment, its blocks translated as texts and its inline markup carried to the translated words
(:mod:`mtkit.text.markup`). URLs, e-mail addresses, numbers, mentions, hashtags, emoji and
inline code come back verbatim in every format (:mod:`mtkit.text.spans`). How a request is
translated: :mod:`mtkit.serve.texts`.

``"source": "auto"``: each text's language is identified (:func:`mtkit.text.langid.
source_language`; of an HTML text, the words that would be translated) and answered per text
as ``"detectedLanguage": {"confidence": 97.0, "language": "en"}`` (a list for a list). A text
the model does not translate from is refused, naming it: ``q: item 1 is in French (fr); this
server translates en-de only`` (items counted from 0, as in the other messages about ``q``).
Short texts are not refused: one with fewer than 10 letters outside URLs, numbers, emoji, ...
is taken to be in the model's source language, as is one whose source language the identifier
finds at least a twentieth as likely as the best (the figures behind the rule are in
:mod:`mtkit.text.langid`). The identification runs here, on the event loop: 0.3-0.5 ms a
caption, a text read up to its first 2,000 characters.

A text whose translation degenerated and was made again by the decoding guard
(:mod:`mtkit.engines.guard`) is named in ``"guard"``, beside ``translatedText``: per text how
(``"lowercased"``...), null for the others; the field is there only when the guard fired.

Problems raise :class:`ApiError`: an HTTP status and a JSON body that names the field.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from mtkit.config import SearchConfig, ServeConfig
from mtkit.data.tags import tag, tag_lines
from mtkit.errors import MtkitError
from mtkit.serve.errors import ApiError
from mtkit.serve.fields import (
    bool_field,
    fraction_field,
    glossary_field,
    int_field,
    kind_of,
    text_field,
    texts_field,
)
from mtkit.serve.languages import language_name
from mtkit.text.glossary import Glossary
from mtkit.text.langid import source_language

MAX_BEAM = 16  # a request may ask for any beam up to this
FORMATS = ("text", "html")  # as LibreTranslate's
# python-multipart logs a warning for each malformed body before raising: the client's mistake,
# answered with a 400 naming it, is no news for the server's log
logging.getLogger("python_multipart").addHandler(logging.NullHandler())


@dataclass
class TranslateRequest:
    """A checked request: its texts, the lines to translate and the search to use."""

    texts: list[str]
    many: bool  # q was a list
    lines: list[str]  # every text's lines, in order
    counts: list[int]  # lines per text
    alternatives: int
    search: SearchConfig
    detected: list[tuple[str, float]] | None  # source "auto": per text, language and confidence
    split: bool = False  # texts cut into sentences (see sentences())
    source: str = ""  # the language the texts are in (the segmenter's rules)
    target: str = ""  # a multilingual model's target, "" for a bilingual one
    tags: list[str] | None = None  # a multilingual model's target tags
    format: str = "text"  # text | html
    scores: bool = False  # answer each text's confidence
    flag_below: float | None = None  # answer which texts' confidence is below this
    glossary: list[tuple[str, str]] = field(default_factory=list)  # the request's own terms

    def tagged(self, lines: list[str]) -> list[str]:
        """``lines`` with a multilingual model's target tag (unchanged for a bilingual one)."""
        if not self.tags:
            return lines
        try:
            return tag_lines(lines, self.target, self.tags)
        except MtkitError as err:
            raise ApiError(400, "q", str(err)) from None


# ---------------------------------------------------------------------------------------------
# The body and the query string

FORM_TYPE, MULTIPART_TYPE = "application/x-www-form-urlencoded", "multipart/form-data"


@dataclass
class Upload:
    """A file part of a ``multipart/form-data`` body: its field, file name, type and bytes."""

    field: str
    filename: str
    content_type: str
    data: bytes


def decode_request(body: bytes, content_type: str, query: bytes | str = b"") -> dict[str, Any]:
    """The fields of a request: its body (JSON, a form or a multipart form) and the query
    string of its URL, merged as LibreTranslate merges them.

    LibreTranslate (``libretranslate/app.py``) reads a JSON body with ``request.get_json()`` and
    anything else with ``request.values``, Werkzeug's ``CombinedMultiDict([args, form])``, whose
    ``get`` returns the first it finds: the query string wins over the form. mtkit does the
    same, and for a JSON body, which LibreTranslate reads alone, the JSON wins and the query
    string only adds the fields the JSON lacks. With an empty body (whatever its type) the
    fields are the query string's, so ``POST /translate?q=hello&source=en&target=de`` is a
    request.
    """
    fields = _form_fields(_utf8(query, "query"), "query") if query else {}
    kind = _bodykind_of(body, content_type)
    if kind == "empty":
        return fields
    if kind == "json":
        return {**fields, **decode_body(body, content_type)}
    return {**decode_body(body, content_type), **fields}


def decode_body(body: bytes, content_type: str) -> dict[str, Any]:
    """The fields of a JSON object, an HTML form (``application/x-www-form-urlencoded``,
    unless the body is plainly JSON) or a ``multipart/form-data`` body (its file parts left
    out: :func:`multipart_form`). A body of any other type, or none, is read as JSON."""
    kind = _bodykind_of(body, content_type)
    if kind == "empty":
        return {}
    if kind == "multipart":
        return multipart_form(body, content_type)[0]
    text = _utf8(body, "body")
    if kind == "form":
        return _form_fields(text, "body")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ApiError(
            400, "body", f"malformed JSON ({err.msg} at line {err.lineno} column {err.colno})"
        ) from None
    except RecursionError:
        raise ApiError(400, "body", "JSON nested too deeply") from None
    except ValueError as err:  # a number of more than 4,300 digits
        raise ApiError(400, "body", f"unreadable JSON ({str(err).split(':')[0]})") from None
    if not isinstance(data, dict):
        raise ApiError(400, "body", f"expected a JSON object, got {kind_of(data)}")
    _refuse_surrogates(data)
    return data


def multipart_form(body: bytes, content_type: str) -> tuple[dict[str, Any], list[Upload]]:
    """A ``multipart/form-data`` body's fields (a repeated ``q`` is a list, as in a form) and
    its file parts, parsed by python-multipart (what Starlette parses forms with)."""
    from python_multipart import FormParser
    from python_multipart.multipart import parse_options_header

    boundary = parse_options_header(content_type)[1].get(b"boundary")
    if not boundary:
        raise ApiError(400, "body", "multipart/form-data without a boundary in its Content-Type")
    parts: list[tuple[bytes, bytes]] = []
    files: list[Any] = []

    def on_field(part: Any) -> None:  # checked once the whole body has parsed
        parts.append((part.field_name or b"", part.value or b""))

    memory = {"MAX_MEMORY_FILE_SIZE": float("inf")}  # the body is in memory (--max-body-bytes)
    parser = FormParser(MULTIPART_TYPE, on_field, files.append, boundary=boundary, config=memory)
    try:
        parser.write(body)
        parser.finalize()
    except ValueError as err:  # python-multipart's errors are ValueErrors
        raise ApiError(400, "body", f"malformed multipart/form-data ({err})") from None
    values: dict[str, list[str]] = {}
    for raw_name, raw_value in parts:
        name = _utf8(raw_name, "body")
        values.setdefault(name, []).append(_utf8(raw_value, name))
    uploads = [
        Upload(
            _utf8(file.field_name or b"", "body"),
            (file.file_name or b"").decode("utf-8", "replace"),
            file.content_type or "application/octet-stream",
            file.file_object.getvalue(),
        )
        for file in files
    ]
    return _collapsed(values), uploads


def _bodykind_of(body: bytes, content_type: str) -> str:
    """How a body is read: empty, json, form or multipart."""
    media = content_type.split(";")[0].strip().lower()
    if not body.strip():
        return "empty"
    if media == MULTIPART_TYPE:
        return "multipart"
    if media == FORM_TYPE and not body.lstrip().startswith((b"{", b"[")):  # curl -d '{...}'
        return "form"
    return "json"  # application/json, every "+json" type, and bodies of any other type or none


def _utf8(data: bytes | str, field: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ApiError(
            400, field, f"invalid UTF-8 (byte 0x{data[err.start]:02x} at byte {err.start})"
        ) from None


def _form_fields(text: str, where: str) -> dict[str, Any]:
    """Form (or query string) fields; a repeated ``q`` is a list, numbers stay text until
    checked."""
    try:
        pairs = urllib.parse.parse_qs(text, keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise ApiError(400, where, "invalid UTF-8 in a percent-encoded value") from None
    return _collapsed(pairs)


def _collapsed(values: dict[str, list[str]]) -> dict[str, Any]:
    return {
        key: items if key == "q" and len(items) > 1 else items[-1] for key, items in values.items()
    }


def _refuse_surrogates(data: dict[str, Any]) -> None:
    """Refuse text that no UTF-8 can carry: a lone surrogate, which JSON can spell
    (``"\\ud800"``) and a form or a query string cannot (its bytes are invalid UTF-8).
    Checked in every field's string and list of strings, and in every field name."""
    for name, value in data.items():
        if (where := _surrogate(name)) is not None:
            raise ApiError(400, "body", f"a field name holds {where}")
        items = value if isinstance(value, list) else [value]
        for i, item in enumerate(items):
            if isinstance(item, str) and (where := _surrogate(item)) is not None:
                at = f"item {i} " if isinstance(value, list) else ""
                raise ApiError(400, name, f"{at}holds {where}")


def _surrogate(text: str) -> str | None:
    """Where ``text`` cannot be encoded as UTF-8, in words; None if it can."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"an unpaired surrogate (U+{ord(text[err.start]):04X}) at character {err.start}"
    return None


# ---------------------------------------------------------------------------------------------
# The request


def request_glossary(server: Glossary | None, pairs: list[tuple[str, str]]) -> Glossary | None:
    """The terms a request's sentences keep: the server's glossary, its own pairs replacing
    the server's for the same source terms (matched as the server's are)."""
    if not pairs:
        return server
    return server.extended(pairs) if server is not None else Glossary(pairs)


def split_lines(text: str) -> list[str]:
    """A text's lines: split on ``\\n``, a ``\\r`` before it dropped."""
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


def parse_request(
    data: dict[str, Any], pair: tuple[str, str], search: SearchConfig, config: ServeConfig
) -> TranslateRequest:
    """Check a request's fields against the model's ``pair`` and the limits in ``config``;
    ``search`` is the server's default, changed by ``beam`` and ``alternatives``."""
    texts, many = texts_field(data)
    chars = sum(len(text) for text in texts)
    if chars > config.max_chars:
        raise ApiError(400, "q", f"{chars} characters, more than the limit of {config.max_chars}")
    per_text = [split_lines(text) for text in texts]
    counts = [len(lines) for lines in per_text]
    if sum(counts) > config.max_lines:
        raise ApiError(400, "q", f"{sum(counts)} lines, more than the limit of {config.max_lines}")
    source, target = text_field(data, "source"), text_field(data, "target")
    targets = pair[1].split(",")  # a multilingual model (issue 16): several, comma-separated
    if source not in (pair[0], "auto") or target not in targets:
        wrong = "source" if source not in (pair[0], "auto") else "target"
        raise ApiError(
            400, wrong, f"this server translates {pair[0]}-{pair[1]} only, not {source}-{target}"
        )
    form = text_field(data, "format", "text")
    if form not in FORMATS:
        raise ApiError(400, "format", f"must be 'text' or 'html', got {form!r}")
    beam = int_field(data, "beam", search.width, 1, MAX_BEAM)
    alternatives = int_field(data, "alternatives", 0, 0, beam - 1)
    if alternatives and form != "text":
        raise ApiError(400, "alternatives", f"given for format 'text' only, not {form!r}")
    flag_below = fraction_field(data, "flag_below")
    scores = bool_field(data, "scores", False) or flag_below is not None
    if scores and form != "text":
        which = "flag_below" if "flag_below" in data else "scores"
        raise ApiError(
            400,
            which,
            f"given for format 'text' only, not {form!r} (a document's words move with its markup)",
        )
    glossary = glossary_field(data, config.max_glossary_terms)
    kind = search.constraints or ("unordered" if glossary else "")  # batched with its kind
    try:
        search = search.replace(beam=beam, nbest=alternatives + 1, scores=scores, constraints=kind)
    except MtkitError as err:
        raise ApiError(400, "beam", str(err)) from None
    lines = [line for lines in per_text for line in lines]
    split = bool_field(data, "split", True)
    tags = [tag(t) for t in targets] if len(targets) > 1 else None
    if tags:  # each line gets the target's tag (or keeps its own); refused tags named here
        try:
            lines = tag_lines(lines, target, tags)
        except MtkitError as err:
            raise ApiError(400, "q", str(err)) from None
    detected = _detected(texts, many, pair, form) if source == "auto" else None
    return TranslateRequest(
        texts,
        many,
        lines,
        counts,
        alternatives,
        search,
        detected,
        split,
        pair[0].split(",")[0],
        target if tags else "",
        tags,
        form,
        scores,
        flag_below,
        glossary,
    )


def _detected(
    texts: list[str], many: bool, pair: tuple[str, str], form: str
) -> list[tuple[str, float]]:
    """Each text's language for ``"source": "auto"``; a text in a language the model does
    not translate from is refused, by its index in ``q``."""
    found = []
    for i, text in enumerate(texts):
        guess = source_language(text, pair[0].split(","), form)
        if not guess.accepted:
            name, code = language_name(guess.language), guess.language
            language = f"{name} ({code})" if name != code else code
            which = f"item {i}" if many else "the text"
            raise ApiError(
                400,
                "q",
                f"{which} is in {language}; this server translates {pair[0]}-{pair[1]} only",
            )
        found.append((guess.language, guess.confidence))
    return found


# ---------------------------------------------------------------------------------------------
# The answer


def build_response(
    request: TranslateRequest,
    texts: list[str],
    alternatives: list[list[str]],
    confidence: list[float] | None = None,
    guard: list[str | None] | None = None,
) -> dict[str, Any]:
    """LibreTranslate's answer: a translation per text (and its ``alternatives``, per text;
    for ``"source": "auto"`` its ``detectedLanguage``); mtkit's ``confidence`` per text when
    asked (rounded to 4 digits), and with ``flag_below`` the texts below it (``flagged``);
    mtkit's ``guard`` per text (how the decoding guard translated it, or None) only where
    the guard fired on one of the texts."""
    answer: dict[str, Any] = {"translatedText": texts if request.many else texts[0]}
    if request.alternatives:
        answer["alternatives"] = alternatives if request.many else alternatives[0]
    if request.scores and confidence is not None:
        rounded = [round(value, 4) for value in confidence]
        answer["confidence"] = rounded if request.many else rounded[0]
        if request.flag_below is not None:
            low = [i for i, value in enumerate(confidence) if value < request.flag_below]
            answer["flagged"] = low if request.many else bool(low)
    if guard is not None and any(guard):
        answer["guard"] = guard if request.many else guard[0]
    if request.detected is not None:
        detected = [
            {"confidence": confidence, "language": language}
            for language, confidence in request.detected
        ]
        answer["detectedLanguage"] = detected if request.many else detected[0]
    return answer
