"""Config helpers: build a dataclass from a mapping (typed, unknown keys refused), apply
command-line overrides, read YAML with one-line errors."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from mtkit.errors import MtkitError

C = TypeVar("C")


def _check_value(name: str, value: Any, annotation: Any, where: str) -> Any:
    """Return ``value`` converted to ``annotation`` or raise MtkitError naming the key."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        if value is None and type(None) in args:
            return None
        annotation = next(a for a in args if a is not type(None))
        origin = typing.get_origin(annotation)
    if dataclasses.is_dataclass(annotation):
        if isinstance(value, annotation):
            return value
        return from_dict(annotation, value, f"{where}: {name}")
    if origin is list:
        (item,) = typing.get_args(annotation)
        if not isinstance(value, list | tuple):
            raise MtkitError(f"{where}: '{name}' must be a list, got {value!r}")
        return [_check_value(name, v, item, where) for v in value]
    if annotation is bool:
        if isinstance(value, bool):
            return value
    elif annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif annotation is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads 1e-3 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
    elif annotation is str:
        if isinstance(value, str):
            return value
    else:  # pragma: no cover - every field uses one of the types above
        return value
    raise MtkitError(
        f"{where}: '{name}' must be {annotation.__name__}, got {type(value).__name__} {value!r}"
    )


def _parse_scalar(text: str) -> Any:
    """Parse a command-line override value with YAML rules (1 -> int, true -> bool, ...)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def from_dict(cls: type[C], data: dict[str, Any], where: str = "config") -> C:
    """Build ``cls`` from a mapping, rejecting unknown keys and wrong types with a clear error."""
    if not isinstance(data, dict):
        raise MtkitError(f"{where}: expected a mapping of options, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs = {}
    for key, value in data.items():
        if key not in names:
            raise MtkitError(f"{where}: unknown option '{key}' (known: {', '.join(sorted(names))})")
        kwargs[key] = _check_value(key, value, hints[key], where)
    return cls(**kwargs)


def apply_overrides(config: C, overrides: dict[str, Any], where: str = "override") -> C:
    """Return a copy of ``config`` with ``overrides`` (already-typed or string values) applied."""
    data = dataclasses.asdict(config)  # type: ignore[call-overload]
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):  # some of a section
            parsed = {k: _parse_scalar(v) if isinstance(v, str) else v for k, v in value.items()}
            value = {**data[key], **parsed}
        data[key] = _parse_scalar(value) if isinstance(value, str) else value
    hints = typing.get_type_hints(type(config))
    for key, value in overrides.items():  # strings stay strings where the field is a str
        if isinstance(value, str) and hints.get(key) is str:
            data[key] = value
    return from_dict(type(config), data, where)


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, with one-line errors for missing files and bad syntax."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MtkitError(f"{path}: no such config file") from None
    except UnicodeDecodeError as err:
        raise MtkitError(f"{path}: not UTF-8 ({err.reason})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise MtkitError(f"{path}:{_yaml_problem(err, text)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise MtkitError(f"{path}: expected a mapping of options at the top level")
    return data


def _yaml_problem(err: yaml.YAMLError, text: str) -> str:
    """`` line N invalid YAML (problem)`` on one line, for any of PyYAML's errors."""
    mark = getattr(err, "problem_mark", None)
    line = f" line {mark.line + 1}" if mark is not None else ""
    if isinstance(err, yaml.reader.ReaderError):  # a character YAML forbids, e.g. NUL
        line = f" line {text.count(chr(10), 0, err.position) + 1}"
    problem = getattr(err, "problem", None) or str(err).strip().splitlines()[0]
    return f"{line} invalid YAML ({problem})"


def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)
