"""The model variants every model, decoding, training and export test runs over (issue 12).

``VARIANTS`` maps a name to ModelConfig overrides: each switch alone at a non-default value
(tests/variant_switches.py, the one list the benchmarks use too; at tiny sizes, :data:`TINY`),
then a few combinations. A variant added here gets the tests of tests/model/test_transformer.py
(cached decoding equals the full pass, with beam moves, sentences leaving and beams sharing their
source; padding invariance; causality), tests/model/test_packed.py and test_inference.py (packed
and int8 agree with fp32), tests/decoding/test_search.py (beam 1 equals greedy),
tests/training/test_variants.py (training resumes bitwise, averaging) and
tests/export/test_export_common.py (refused by name until an exporter supports it).
"""

from __future__ import annotations

from typing import Any

from variant_switches import SWITCHES

from mtkit.config import MODEL_PRESETS

SHAPE = ("d_model", "ffn_dim", "heads", "encoder_layers", "decoder_layers", "dropout")


def switches(preset: str) -> dict[str, Any]:
    """A preset's variant switches, without its sizes (the tests' tiny models keep theirs)."""
    return {k: v for k, v in MODEL_PRESETS[preset].items() if k not in SHAPE}


# a switch's own settings on the tests' tiny models (a relative window shorter than their
# sentences, so that clipping is reached)
TINY: dict[str, dict[str, Any]] = {
    "rmsnorm": dict(norm_eps=1e-6),
    "relative": dict(max_relative_position=3),
}
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    **{name: {**overrides, **TINY.get(name, {})} for name, overrides in SWITCHES.items()},
    # combinations
    "llama_like": dict(
        pre_norm=True,
        norm="rmsnorm",
        positions="rope",
        ffn_activation="swiglu",
        kv_heads=2,
        bias=False,
    ),
    "modern_mqa": dict(pre_norm=True, positions="rope", kv_heads=1),  # a preset
    "alibi_mqa_geglu": dict(positions="alibi", kv_heads=1, ffn_activation="geglu"),
    "relative_gqa_shared": dict(positions="relative", kv_heads=2, share_layers=True, pre_norm=True),
    "average_learned_no_bias": dict(
        decoder_self_attention="average", positions="learned", bias=False, norm="rmsnorm"
    ),
    # presets (their full shapes: tests/model/test_presets.py)
    "tiny_student": switches("transformer-tiny-student"),
    "tiny_student_aan": switches("transformer-tiny-student-aan"),
}


def variant_params() -> list[Any]:
    """``VARIANTS`` as pytest parameters, ids = names."""
    import pytest

    return [pytest.param(overrides, id=name) for name, overrides in VARIANTS.items()]
