"""The fields of a request, each read and checked on its own; a wrong one is an
:class:`~mtkit.serve.errors.ApiError` (400) naming it. Form fields are text: ``"2"``, ``"true"``
are read as their JSON counterparts."""

from __future__ import annotations

import re
from typing import Any

from mtkit.errors import MtkitError
from mtkit.serve.errors import ApiError
from mtkit.text.glossary import check_pair


def kind_of(value: Any) -> str:
    """How a JSON value is named in an error message."""
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }
    return names.get(type(value), type(value).__name__)


def text_field(data: dict[str, Any], name: str, default: str | None = None) -> str:
    value = data.get(name, default)
    if value is None:
        raise ApiError(400, name, "missing")
    if not isinstance(value, str):
        raise ApiError(400, name, f"must be a string, got {kind_of(value)}")
    return value


def int_field(data: dict[str, Any], name: str, default: int | None, low: int, high: int) -> int:
    value = data.get(name, default)
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value):  # form fields are text
        value = int(value)
    if value is None and default is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool):
        raise ApiError(400, name, f"must be an integer, got {kind_of(value)}")
    if not low <= value <= high:
        raise ApiError(400, name, f"must be between {low} and {high}, got {value}")
    return value


def bool_field(data: dict[str, Any], name: str, default: bool) -> bool:
    value = data.get(name, default)
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "false", "0"):
        value = value.strip().lower() in ("true", "1")  # form fields are text
    if not isinstance(value, bool):
        raise ApiError(400, name, f"must be true or false, got {kind_of(value)}")
    return value


def fraction_field(data: dict[str, Any], name: str) -> float | None:
    """A number in [0, 1] (a form's text too), or None when the field is absent."""
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ApiError(400, name, f"must be a number, got {value!r}") from None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ApiError(400, name, f"must be a number, got {kind_of(value)}")
    if not 0 <= value <= 1:  # NaN too
        raise ApiError(400, name, f"must be between 0 and 1, got {value}")
    return float(value)


def glossary_field(data: dict[str, Any], limit: int) -> list[tuple[str, str]]:
    """``"glossary"``: a list of ``[source term, target term]`` pairs (a form's text: one
    ``source<TAB>target`` pair a line), at most ``limit`` of them."""
    value = data.get("glossary")
    if value is None:
        return []
    if isinstance(value, str):  # a form field
        value = [line.split("\t") for line in value.splitlines() if line.strip()]
    if not isinstance(value, list):
        raise ApiError(
            400, "glossary", f"must be a list of [source, target] pairs, got {kind_of(value)}"
        )
    if len(value) > limit:
        raise ApiError(
            400,
            "glossary",
            f"{len(value)} terms, more than the limit of {limit} (--max-glossary-terms)",
        )
    pairs = []
    for i, pair in enumerate(value):
        if not (
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(term, str) for term in pair)
        ):
            raise ApiError(400, "glossary", f"item {i} must be a [source, target] pair of strings")
        try:
            pairs.append(check_pair(pair[0], pair[1], f"item {i}"))
        except MtkitError as err:
            raise ApiError(400, "glossary", str(err)) from None
    return pairs


def texts_field(data: dict[str, Any]) -> tuple[list[str], bool]:
    if "q" not in data:
        raise ApiError(400, "q", "missing (the text to translate)")
    q = data["q"]
    if isinstance(q, str):
        return [q], False
    if isinstance(q, list):
        for i, item in enumerate(q):
            if not isinstance(item, str):
                raise ApiError(
                    400, "q", f"must be a string or a list of strings; item {i} is {kind_of(item)}"
                )
        return q, True
    raise ApiError(400, "q", f"must be a string or a list of strings, got {kind_of(q)}")
