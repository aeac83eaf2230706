"""A checkpoint written before the model variants (tests/fixtures/make_old_default.py) still
loads with the same parameter names, initializes the same and translates identically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from mtkit.checkpoint import Checkpoint
from mtkit.config import TranslateConfig
from mtkit.engines import load_engine
from mtkit.model.transformer import build_model

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CHECKPOINT = FIXTURES / "old-default.pt"
EXPECTED = json.loads((FIXTURES / "old-default.json").read_text("utf-8"))


def test_old_checkpoint_loads_with_the_same_parameter_names() -> None:
    ckpt = Checkpoint.load(CHECKPOINT)
    model = ckpt.build_model()
    assert sorted(model.state_dict()) == EXPECTED["state_dict_keys"] == sorted(ckpt.model)


def test_default_model_initializes_as_before() -> None:
    """Same seed, same initial weights: runs started before the variants reproduce."""
    cfg = Checkpoint.load(CHECKPOINT).model_config
    torch.manual_seed(0)
    sums = {k: float(v.double().sum()) for k, v in build_model(cfg).state_dict().items()}
    assert sums == pytest.approx(EXPECTED["init_sums_seed0"], rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(
    "name, options", [("greedy", dict(beam=1)), ("beam2", dict(beam=2, nbest=2))]
)
def test_old_checkpoint_translates_as_before(name: str, options: dict) -> None:
    # the search as it was; the guard (newer) would translate the looping line 4 again
    flat = {"device": "cpu", "guard": False, **options}
    engine = load_engine([str(CHECKPOINT)], TranslateConfig.from_flat(flat))
    got = engine.translate(EXPECTED["lines"])
    for hyps, expected in zip(got, EXPECTED[name], strict=True):
        assert [h.text for h in hyps] == [e["text"] for e in expected]
        assert [h.score for h in hyps] == pytest.approx([e["score"] for e in expected], abs=1e-5)
        assert [h.logprob for h in hyps] == pytest.approx(
            [e["logprob"] for e in expected], abs=1e-5
        )
