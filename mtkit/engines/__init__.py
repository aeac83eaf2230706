"""Decoding engines behind one small protocol (:class:`mtkit.engines.base.Engine`).

An engine turns lines of text into translations: ``native`` runs mtkit's own model and search
(one checkpoint or an ensemble), ``ct2`` runs an exported CTranslate2 directory. Engines are
named here and imported lazily (sacrebleu's registry of tokenizers is the model), so adding one
touches no pipeline code and an engine's optional library is imported only when it is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from mtkit.config import ENGINES, TranslateConfig
from mtkit.engines.base import Engine
from mtkit.errors import MtkitError

MODULES = {"mtkit": "mtkit.engines.native", "ctranslate2": "mtkit.engines.ct2"}
assert set(MODULES) == set(ENGINES), "every engine the config accepts has a module"


def load_engine(models: Sequence[str], config: TranslateConfig) -> Engine:
    """Load the engine ``config.engine`` over ``models`` (checkpoints, or one exported dir)."""
    if not models:
        raise MtkitError("no model given (-m CHECKPOINT)")
    module = importlib.import_module(MODULES[config.engine])
    return module.load(list(models), config)
