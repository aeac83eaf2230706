"""What the engine tests share: the model's training data, every engine kind, its config."""

from __future__ import annotations

import sys
from pathlib import Path

from mtkit.config import TranslateConfig
from mtkit.data.tokenizer import train_spm

sys.path.insert(0, str(Path(__file__).parents[1] / "export"))  # the export tests' models
from export_helpers import TEST_LINES, TRAIN, make_ckpt  # noqa: E402

SEARCH = dict(beam=2, max_len_a=1.0, max_len_b=2)
LINES = TEST_LINES + [src for src, _ in TRAIN[:11]]
__all__ = ["KINDS", "LINES", "TRAIN", "engine_config", "make_ckpt", "trained_ckpt"]

# test id: (engine, settings). CTranslate2 searches greedily here: its beam's length bound is
# one per batch (mtkit.engines.ct2), so its beam scores depend on the batch, by design
KINDS = {
    "mtkit": ("mtkit", {}),
    "mtkit-2-workers": ("mtkit", {"workers": 2, "threads": 1}),
    "ctranslate2": ("ctranslate2", {"beam": 1}),
    "ctranslate2-2-workers": ("ctranslate2", {"beam": 1, "workers": 2, "threads": 1}),
}


def engine_config(kind: str, **values: object) -> TranslateConfig:
    name, runtime = KINDS[kind]
    return TranslateConfig.from_flat(
        {"engine": name, "device": "cpu", "threads": 1, **SEARCH, **runtime, **values}
    )


def trained_ckpt(directory: Path) -> Path:
    """A model briefly trained on the word-substitution task (distinct outputs per line)."""
    spm = train_spm([x for pair in TRAIN for x in pair], vocab_size=110)
    return make_ckpt(directory, {"src": spm, "tgt": spm}, steps=120, max_positions=32).path
