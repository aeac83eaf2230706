"""One config dataclass per stage, YAML loading, and type-checked overrides.

Every config is plain data (str, int, float, bool, lists of those, None) so that it round-trips
through YAML and lives inside checkpoints that load with ``torch.load(weights_only=True)``.

One module per stage, every name re-exported here (import from ``mtkit.config``):

    model.py     ModelConfig, MODEL_PRESETS
    data.py      SpmConfig, PrepareConfig, ShortlistConfig (`mtkit spm`, `prepare`, `shortlist`)
    train.py     TrainConfig, AugmentConfig (its augment section)
    search.py    SearchConfig, TranslateConfig (`mtkit translate`, and every decoder)
    distill.py   DistillConfig (`mtkit distill`)
    serve.py     ServeConfig
    evaluate.py  EvaluateConfig
    common.py    from_dict, apply_overrides, load_yaml, to_dict: mapping <-> dataclass, typed
"""

from mtkit.config.common import apply_overrides, from_dict, load_yaml, to_dict
from mtkit.config.data import PrepareConfig, ShortlistConfig, SpmConfig
from mtkit.config.distill import DistillConfig
from mtkit.config.evaluate import EvaluateConfig
from mtkit.config.model import MODEL_PRESETS, ModelConfig
from mtkit.config.search import (
    COMPILE_MODES,
    CPU_MATMULS,
    DEFAULT_LAYER,
    DTYPES,
    LENPEN_STYLES,
    TEXT_FORMATS,
    SearchConfig,
    TranslateConfig,
    alignment_layer,
)
from mtkit.config.serve import BATCHING, LOG_LEVELS, ServeConfig, ServedPath
from mtkit.config.train import (
    AUGMENT_DEFAULT,
    AUGMENT_MODIFIERS,
    AugmentConfig,
    TrainConfig,
    augment_spec,
)

__all__ = [
    "AUGMENT_DEFAULT",
    "AUGMENT_MODIFIERS",
    "AugmentConfig",
    "COMPILE_MODES",
    "CPU_MATMULS",
    "DEFAULT_LAYER",
    "DTYPES",
    "DistillConfig",
    "LENPEN_STYLES",
    "LOG_LEVELS",
    "MODEL_PRESETS",
    "EvaluateConfig",
    "ModelConfig",
    "PrepareConfig",
    "SearchConfig",
    "ShortlistConfig",
    "BATCHING",
    "ServeConfig",
    "ServedPath",
    "SpmConfig",
    "TEXT_FORMATS",
    "TrainConfig",
    "TranslateConfig",
    "alignment_layer",
    "augment_spec",
    "apply_overrides",
    "from_dict",
    "load_yaml",
    "to_dict",
]
