"""Helpers shared by the subcommands: one-line errors, and options whose default is a config's."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import click

from mtkit.errors import MtkitError

F = TypeVar("F", bound=Callable[..., Any])


def one_line(message: str) -> str:
    """A message on one line: line breaks (from a library's error text) become spaces.

    >>> one_line("invalid YAML (bad character\\n  in <file>)")
    'invalid YAML (bad character in <file>)'
    """
    return re.sub(r"\s*\n\s*", " ", message.strip())


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn MtkitError (and a few OS errors a user causes) into click's one-line error, exit 1."""
    try:
        yield
    except MtkitError as err:
        raise click.ClickException(one_line(str(err))) from None
    except FileNotFoundError as err:
        raise click.ClickException(f"{err.filename}: no such file") from None
    except IsADirectoryError as err:
        raise click.ClickException(f"{err.filename}: is a directory") from None
    except PermissionError as err:
        raise click.ClickException(f"{err.filename}: permission denied") from None
    except OSError as err:
        where = f"{err.filename}: " if err.filename else ""
        raise click.ClickException(f"{where}{err.strerror or err}") from None


# ---------------------------------------------------------------------------------------------
# Options whose default is a config field


class CommaList(click.ParamType):
    """``a,b,c`` on the command line, ``["a", "b", "c"]`` for a ``list[str]`` config field."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return value if isinstance(value, list) else str(value).split(",")


def config_default(config: Any, field: str) -> Any:
    """The default of ``field``: a field of dataclass ``config``, or a keyword parameter of
    function ``config`` (for a stage without a config dataclass, e.g. ``plot_runs``)."""
    if dataclasses.is_dataclass(config):
        if field not in {f.name for f in dataclasses.fields(config)}:
            raise TypeError(f"{config.__name__} has no field {field!r}")
        return getattr(config(), field)  # type: ignore[operator]
    parameter = inspect.signature(config).parameters.get(field)
    if parameter is None or parameter.default is inspect.Parameter.empty:
        raise TypeError(f"{config.__name__} has no keyword parameter {field!r}")
    return parameter.default


def _default_text(value: Any) -> str | None:
    """How ``--help`` shows a default; None for the uninformative ones ("", [], None)."""
    if value is None or value == "" or value == []:
        return None
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


class ConfigOption(click.Option):
    """A click option whose default is a config field's; made by :func:`config_option`."""

    def __init__(
        self,
        param_decls: Sequence[str],
        *,
        config: Any,
        field: str,
        override: bool = False,
        **attrs: Any,
    ) -> None:
        if "default" in attrs:
            raise TypeError(f"{field}: the default comes from {config.__name__}, not default=")
        self.config, self.field, self.override = config, field, override
        self.config_value = config_default(config, field)
        attrs["default"] = None if override else self.config_value
        attrs.setdefault("show_default", _default_text(self.config_value) is not None)
        super().__init__(param_decls, **attrs)

    def get_help_extra(self, ctx: click.Context) -> Any:
        """``[default: ...]`` from the field, also where click sees None (``override``); lists
        as typed (``bleu,chrf``). Flags keep click's own (``[default: joint]``)."""
        extra = super().get_help_extra(ctx)
        text = _default_text(self.config_value)
        if self.show_default and text is not None and not self.is_flag:
            extra["default"] = text
        elif self.is_flag and self.secondary_opts and isinstance(self.config_value, bool):
            names = self.opts if self.config_value else self.secondary_opts  # also when None
            extra["default"] = names[0].lstrip("-")  # (override) stands for "not given"
        return extra

    def type_cast_value(self, ctx: click.Context, value: Any) -> Any:
        value = super().type_cast_value(ctx, value)
        return list(value) if self.multiple and value is not None else value  # list[...] fields


def _field_name(flags: tuple[str, ...]) -> str:
    """``--paired-bs-n`` -> ``paired_bs_n``: the first long flag (``--joint/--separate``: joint)."""
    for flag in flags:
        if flag.startswith("--"):
            return flag.split("/")[0][2:].replace("-", "_")
    raise TypeError(f"{flags}: give field= (no --long flag to name it after)")


def config_option(
    *flags: str, config: Any, field: str = "", override: bool = False, **attrs: Any
) -> Callable[[F], F]:
    """A click option whose default is the config's: one source for defaults, shown in --help.

    The option's Python name is the field's, so a command can pass its options on as
    ``Config(**options)``. ``field`` defaults to the first long flag (``--paired-bs-n`` ->
    ``paired_bs_n``); ``config`` is the stage's config dataclass (or, for a stage without one,
    the pipeline function whose keyword default it is). ``attrs`` go to :func:`click.option`
    (``type``, ``help``, ``is_flag``, ``multiple``, ``metavar``, ``show_default=False``, ...)
    except ``default``, which is refused. ``list[str]`` fields take ``type=CommaList()``
    (``--metrics bleu,chrf``) or ``multiple=True`` (the value is then a list, not a tuple).

    ``override=True``: the value is None unless the flag is given, so that a command that layers
    settings (defaults < YAML or a saved run < flags, as ``mtkit train`` does) can tell "not
    given" from "given the default"; ``--help`` still shows the field's default.

    Example (``mtkit evaluate``)::

        @config_option("--paired-bs-n", config=EvaluateConfig, type=click.IntRange(1),
                       help="Bootstrap resamples.")
        # --paired-bs-n INTEGER RANGE  Bootstrap resamples.  [default: 1000; x>=1]

    A module binds its config once, ``option = partial(config_option, config=PrepareConfig)``,
    then writes ``@option("--max-ratio", type=float, help=...)``. A table of options goes
    through it row by row (``mtkit train``'s TRAIN_OPTIONS; a flag row takes ``is_flag=True``)::

        for flags, field, kind, text in reversed(SEARCH_OPTIONS):
            func = config_option(*flags, config=SearchConfig, field=field, type=kind,
                                 help=text, override=True)(func)

    ``tests/cli/test_cli_options.py`` checks every command's defaults against its config: add a
    new command there.
    """
    name = field or _field_name(flags)
    return click.option(
        *flags, name, cls=ConfigOption, config=config, field=name, override=override, **attrs
    )
