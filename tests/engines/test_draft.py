"""The draft of speculative decoding (mtkit.engines.draft): its precision follows --draft-dtype and
--draft-quantize, else the models', and the engine then decodes exactly as without a draft."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from engine_helpers import LINES, SEARCH
from torch import nn

from mtkit.config import TranslateConfig
from mtkit.engines import load_engine
from mtkit.engines.draft import draft_precision
from mtkit.errors import MtkitError
from mtkit.model.packed import Bf16Linear, PackedLinear

pytestmark = pytest.mark.usefixtures("one_thread")
CPU = torch.device("cpu")


def config(**values: object) -> TranslateConfig:
    flat = {"device": "cpu", "threads": 1, **SEARCH, "beam": 1, **values}
    return TranslateConfig.from_flat(flat)


@pytest.mark.parametrize(
    ("values", "models_dtype", "expected"),
    [
        ({}, "fp32", ("fp32", "")),
        ({"quantize": "int8"}, "fp32", ("fp32", "int8")),  # as the models
        ({"quantize": "int8", "draft_quantize": "none"}, "fp32", ("fp32", "")),
        ({"draft_quantize": "int8"}, "fp32", ("fp32", "int8")),
        ({"draft_dtype": "bf16"}, "fp32", ("bf16", "")),
        ({"quantize": "int8", "draft_dtype": "bf16"}, "fp32", ("bf16", "")),  # int8 takes fp32
        ({}, "bf16", ("bf16", "")),
        ({"draft_dtype": "fp32", "draft_quantize": "int8"}, "bf16", ("fp32", "int8")),
    ],
)
def test_the_drafts_precision(values: dict, models_dtype: str, expected: tuple[str, str]) -> None:
    assert draft_precision(config(draft="d.pt", **values), CPU, models_dtype) == expected


@pytest.mark.parametrize(
    ("values", "models_dtype", "message"),
    [
        ({"draft_quantize": "int8"}, "bf16", "--draft-quantize int8 needs an fp32 draft"),
        ({"draft_dtype": "fp16"}, "fp32", "--draft-dtype fp16 needs a CUDA device"),
    ],
)
def test_a_precision_the_draft_cannot_have_is_refused(
    values: dict, models_dtype: str, message: str
) -> None:
    with pytest.raises(MtkitError, match=message):
        draft_precision(config(draft="d.pt", **values), CPU, models_dtype)


def bf16_linears(model: nn.Module) -> tuple[int, int]:
    """(linear layers computing in bf16, all linear layers) of a prepared model."""
    kinds = (nn.Linear, PackedLinear, Bf16Linear)
    layers = [m for m in model.modules() if isinstance(m, kinds)]
    bf16 = [
        m
        for m in layers
        if isinstance(m, Bf16Linear) or getattr(m, "dtype", None) == torch.bfloat16
    ]
    return len(bf16), len(layers)


def test_a_bf16_draft_proposes_in_bf16_and_the_output_stays_the_models(
    engine_ckpt: Path,
) -> None:
    ckpt = str(engine_ckpt)
    plain = load_engine([ckpt], config())
    engine = load_engine([ckpt], config(draft=ckpt, draft_dtype="bf16"))
    found, total = bf16_linears(engine.draft.model)
    assert total > 0 and found == total
    assert bf16_linears(engine.models[0]) == (0, bf16_linears(engine.models[0])[1])
    expected = [[h.text for h in hyps] for hyps in plain.translate(LINES)]
    assert [[h.text for h in hyps] for hyps in engine.translate(LINES)] == expected
    assert engine.draft.stats.row_passes > 0
