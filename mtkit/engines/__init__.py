"""Decoding engines behind one skeleton (:class:`mtkit.engines.base.Engine`), named here.

An engine turns lines of text into translations: ``mtkit`` runs mtkit's own model and search
(one checkpoint or an ensemble), ``ctranslate2`` runs a directory written by `mtkit export
--format ctranslate2`. This registry is the one place that names them: the CLI's choices, the
config's check and the server read it. Each engine is a module imported lazily (sacrebleu's
registry of tokenizers is the model), so an engine's optional library is imported only when it
is used; the module has ``load(models, config, announce=True)`` and, for an engine that the
registry runs in worker processes under ``--workers``, ``describe(models, config)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass

from mtkit.config import TranslateConfig
from mtkit.engines.base import Engine
from mtkit.errors import MtkitError


@dataclass(frozen=True)
class EngineEntry:
    """One engine: its name, module, what ``-m`` names for it, and how it runs ``--workers``."""

    name: str
    module: str
    model_format: str  # what -m names, for help texts and errors
    worker_processes: bool  # --workers N: N worker processes (else the engine's own threads)


ENGINES = {
    entry.name: entry
    for entry in (
        EngineEntry("mtkit", "mtkit.engines.native", "checkpoint (several: an ensemble)", True),
        EngineEntry("ctranslate2", "mtkit.engines.ct2", "directory from `mtkit export`", False),
    )
}


def engine_names() -> tuple[str, ...]:
    return tuple(ENGINES)


def engine_entry(name: str) -> EngineEntry:
    """The registered engine ``name``; a one-line error naming the known ones otherwise."""
    if name not in ENGINES:
        raise MtkitError(f"--engine: unknown engine {name!r} ({' or '.join(ENGINES)})")
    return ENGINES[name]


def load_engine(models: Sequence[str], config: TranslateConfig) -> Engine:
    """Load the engine ``config.engine`` over ``models`` (checkpoints, or one exported dir);
    with ``config.workers`` > 1, in worker processes where the engine cannot run several
    batches at once itself."""
    entry = engine_entry(config.engine)
    if not models:
        raise MtkitError(f"no model given (-m: a {entry.model_format})")
    if config.workers > 1 and entry.worker_processes:
        from mtkit.engines import parallel

        return parallel.load(entry.module, list(models), config)
    return importlib.import_module(entry.module).load(list(models), config)
