"""The student presets (issue 30) at their own depth (6 encoder, 2 decoder layers), narrowed to a
tiny width: each builds, takes a training step, and decodes with its cache equal to the full
pass. Their switches are variants in tests/variants.py, which runs every variant test over them:
the standard-attention student exports to CTranslate2 with a parity check, the average-attention
one is refused by name (tests/export/test_export_variants.py)."""

from __future__ import annotations

import pytest
import torch
from model_helpers import assert_cache_equals_full
from variants import VARIANTS, switches

from mtkit.config import MODEL_PRESETS, ModelConfig
from mtkit.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from mtkit.model.transformer import build_model

STUDENTS = ["transformer-tiny-student", "transformer-tiny-student-aan"]
TINY = dict(d_model=32, ffn_dim=64, heads=4, dropout=0.0, src_vocab_size=23, tgt_vocab_size=29)
pytestmark = pytest.mark.usefixtures("one_thread")


def test_students_are_deep_shallow_and_their_switches_are_variants() -> None:
    for name in STUDENTS:
        shape = [MODEL_PRESETS[name][k] for k in ("encoder_layers", "decoder_layers", "d_model")]
        assert shape == [6, 2, 256]
        assert switches(name) in VARIANTS.values(), name
    assert MODEL_PRESETS["transformer-tiny-student"].get("decoder_self_attention") is None
    assert MODEL_PRESETS["transformer-tiny-student-aan"]["decoder_self_attention"] == "average"


@pytest.mark.parametrize("name", STUDENTS)
def test_student_trains_a_step_and_decodes_with_its_cache(name: str) -> None:
    torch.manual_seed(0)
    model = build_model(ModelConfig(**{**MODEL_PRESETS[name], **TINY}))
    assert len(model.encoder_stack()) == 6 and len(model.decoder_stack()) == 2
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, 23, (3, 7), generator=g)
    src[:, -1], src[2, 4:] = EOS_ID, PAD_ID
    tgt = torch.cat([torch.full((3, 1), BOS_ID), torch.randint(4, 29, (3, 6), generator=g)], 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    before = [p.detach().clone() for p in model.parameters()]
    logits = model(src, tgt[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten())
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    changed = [not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True)]
    assert all(changed), f"{changed.count(False)} parameter tensors did not train"
    model.eval()
    assert_cache_equals_full(model, src, tgt)
