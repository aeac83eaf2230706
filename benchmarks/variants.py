"""The Transformer variants the benchmarks compare, on the small preset (issues 12 and 13).

Each row names a preset and ModelConfig overrides, exactly as `mtkit train --preset P --set
model.KEY=VALUE` takes them. ``baseline`` is today's default (post-LN, sinusoidal, LayerNorm,
ReLU, full multi-head attention); each switch alone comes from tests/variant_switches.py, the
one list the tests are built from too; then presets and tuned rows. Stdlib only.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from variant_switches import SWITCHES  # noqa: E402

BASELINE = "baseline"
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    BASELINE: ("transformer-small", {}),
    **{name: ("transformer-small", overrides) for name, overrides in SWITCHES.items()},
    "deep_shallow": ("transformer-deep-shallow", {}),
    # the tuned row: a post-LN 6-layer encoder does not train at the shared learning rate
    "deep_shallow_pre_norm": ("transformer-deep-shallow", {"pre_norm": True}),
    # the combination the single-variant rows suggest (pre-LN and rotary positions)
    "modern": ("transformer-small-modern", {}),
    # its tuned row: pre-LN tolerates a higher peak learning rate (Xiong et al. 2020)
    "modern_lr3e-3": ("transformer-small-modern", {}),
    # speed-preset candidates: the modern preset with a quarter or half of the decoding state
    "modern_multi_query": ("transformer-small-modern", {"kv_heads": 1}),
    "modern_grouped_query": ("transformer-small-modern", {"kv_heads": 2}),
    # the CPU bf16 ablation (issue 17): the modern preset trained under bf16 autocast
    "modern_bf16": ("transformer-small-modern", {}),
    # its fp32 side, named: `auto` may train bf16 where a verdict says so (issue 53, AMX)
    "modern_fp32": ("transformer-small-modern", {}),
}
# training settings other than the shared ones (`--set KEY=VALUE` of `mtkit train`)
TRAIN_SETTINGS: dict[str, dict[str, Any]] = {
    "modern_lr3e-3": {"lr": 3e-3},
    "modern_bf16": {"precision": "bf16"},
    "modern_fp32": {"precision": "fp32"},
}


def value_text(value: Any) -> str:
    """A setting as `mtkit train --set` and YAML take it (booleans in lower case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def set_args(overrides: dict[str, Any], prefix: str = "model.") -> list[str]:
    """``--set model.KEY=VALUE`` arguments for `mtkit train` (``prefix=""``: TrainConfig keys)."""
    args: list[str] = []
    for key, value in overrides.items():
        args += ["--set", f"{prefix}{key}={value_text(value)}"]
    return args
