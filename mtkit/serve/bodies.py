"""Request bodies read into fields, without HTTP: JSON, an HTML form, a multipart form (with its
file parts) and the query string, merged as LibreTranslate merges them (:func:`decode_request`).
Text must be text: invalid UTF-8, or a JSON string holding a lone surrogate (``"\\ud800"``),
which no UTF-8 can carry, is refused naming its field. What the fields mean and how each is
checked: :mod:`mtkit.serve.api` and :mod:`mtkit.serve.fields`.

Problems raise :class:`~mtkit.serve.errors.ApiError`: a 400 and a JSON body that names the field.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from dataclasses import dataclass
from typing import Any

from mtkit.serve.errors import ApiError
from mtkit.serve.fields import kind_of

# python-multipart logs a warning for each malformed body before raising: the client's mistake,
# answered with a 400 naming it, is no news for the server's log
logging.getLogger("python_multipart").addHandler(logging.NullHandler())

FORM_TYPE, MULTIPART_TYPE = "application/x-www-form-urlencoded", "multipart/form-data"


@dataclass
class FilePart:
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


def multipart_form(body: bytes, content_type: str) -> tuple[dict[str, Any], list[FilePart]]:
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
        FilePart(
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
