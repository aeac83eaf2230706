"""Every model variant (tests/variants.py) through both exporters: CTranslate2 writes each one
it can represent, and its greedy output equals mtkit's; Hugging Face Marian writes the default
and GELU models; everything else is refused with one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from export_helpers import TEST_LINES, Ckpt, greedy_reference, make_ckpt, pad
from variants import VARIANTS, variant_params

from mtkit.config import ModelConfig, SearchConfig, TranslateConfig
from mtkit.data.tokenizer import EOS_ID
from mtkit.errors import MtkitError
from mtkit.export import check_supported
from mtkit.export.ct2 import SUPPORTS as CT2_SUPPORTS
from mtkit.export.ct2 import WHY as CT2_WHY
from mtkit.export.hf import marian_config

BOUND = 8  # greedy tokens per line: short outputs keep 20 exports quick
WRITES = "writes"
# By hand, from what CTranslate2 4.8's TransformerSpec and transformers' MarianMTModel can hold:
# per variant (CTranslate2, Marian), WRITES or the field its one-line refusal names. An oracle
# independent of the exporters' whitelists (SUPPORTS): change one, and this table must follow.
EXPECTED: dict[str, tuple[str, str]] = {
    "default": (WRITES, WRITES),
    "pre_norm": (WRITES, "pre_norm"),  # Marian: post-LN only
    "rmsnorm": (WRITES, "norm"),
    "learned": (WRITES, "positions"),
    "relative": (WRITES, "positions"),
    "rope": (WRITES, "positions"),
    "alibi": ("positions", "positions"),  # CTranslate2: ALiBi in the decoder only
    "multi_query": (WRITES, "kv_heads"),
    "grouped_query": (WRITES, "kv_heads"),
    "gelu": (WRITES, WRITES),
    "swiglu": (WRITES, "ffn_activation"),
    "geglu": (WRITES, "ffn_activation"),
    "no_bias": (WRITES, "bias"),
    "average": ("decoder_self_attention", "decoder_self_attention"),
    "shared_layers": (WRITES, "share_layers"),  # CTranslate2: as copies
    "llama_like": (WRITES, "norm"),
    "modern_mqa": (WRITES, "positions"),
    "alibi_mqa_geglu": ("positions", "positions"),
    "relative_gqa_shared": (WRITES, "positions"),
    "average_learned_no_bias": ("decoder_self_attention", "norm"),
    "tiny_student": (WRITES, "positions"),
    "tiny_student_aan": ("decoder_self_attention", "decoder_self_attention"),
}


def expected(overrides: dict, exporter: int) -> str:
    """EXPECTED for the variant with these overrides: 0 CTranslate2, 1 Marian."""
    name = next(name for name, o in VARIANTS.items() if o == overrides)
    return EXPECTED[name][exporter]


def refusal(field: str) -> str:
    """The one line naming ``field`` (Marian's own post-LN check words pre_norm its way)."""
    if field == "pre_norm":
        return r"^model option pre_norm=true \(pre-LN\) cannot be exported"
    return rf"^model\.{field}=.* cannot be exported"


def variant_ckpt(ckpt_dir: Path, spms: dict, overrides: dict) -> Ckpt:
    return make_ckpt(ckpt_dir, spms, steps=40, **overrides)  # a few steps: outputs end in EOS


def greedy_lines(ck: Ckpt) -> list[str]:
    ids = ck.src.encode(TEST_LINES)
    return ck.tgt.decode([greedy_reference(ck.model, row, BOUND) for row in ids])


def test_every_variant_has_an_expectation() -> None:
    assert EXPECTED.keys() == VARIANTS.keys()


@pytest.mark.parametrize("overrides", variant_params())
def test_whitelists_write_what_the_formats_hold(overrides: dict) -> None:
    """Both exporters' config checks (no extra needed) against the hand-written table."""
    cfg = ModelConfig(d_model=16, ffn_dim=32, heads=4, **overrides)
    checks = (
        lambda: check_supported(cfg, "CTranslate2", CT2_SUPPORTS, CT2_WHY),
        lambda: marian_config(cfg),
    )
    for exporter, check in enumerate(checks):
        want = expected(overrides, exporter)
        if want == WRITES:
            check()
            continue
        with pytest.raises(MtkitError, match=refusal(want)) as err:
            check()
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("overrides", variant_params())
def test_ctranslate2_writes_what_it_can_and_decodes_as_mtkit(
    overrides: dict, ckpt_dir: Path, spms: dict, tmp_path: Path
) -> None:
    pytest.importorskip("ctranslate2")
    from mtkit.engines import load_engine
    from mtkit.engines.base import best_texts
    from mtkit.export.ct2 import export_ct2

    ck = variant_ckpt(ckpt_dir, spms, overrides)
    if expected(overrides, 0) != WRITES:
        with pytest.raises(MtkitError, match=refusal(expected(overrides, 0))) as err:
            export_ct2(ck.path, tmp_path / "ct2")
        assert "\n" not in str(err.value) and not (tmp_path / "ct2").exists()
        return
    out = export_ct2(ck.path, tmp_path / "ct2")
    # the engine's search as mtkit's generate: the guard's retries of a random model's loops
    # are the guard's, tested on their own (tests/engines/test_engine_guard.py)
    search = SearchConfig(beam=1, max_len_a=0.0, max_len_b=BOUND, guard=False)
    config = TranslateConfig(search, engine="ctranslate2", device="cpu")
    got = best_texts(load_engine([str(out)], config).translate(TEST_LINES))
    assert got == greedy_lines(ck)


def test_a_mismatching_conversion_is_not_written(
    ckpt_dir: Path, spms: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe check catches a conversion whose weights are wrong (here: rotary positions
    written as the interleaved layout, which CTranslate2 reads differently)."""
    pytest.importorskip("ctranslate2")
    from mtkit.export import ct2

    ck = variant_ckpt(ckpt_dir, spms, dict(positions="rope"))
    real = ct2._side_options
    monkeypatch.setattr(ct2, "_side_options", lambda cfg: {**real(cfg), "rotary_interleave": True})
    with pytest.raises(MtkitError, match="export check failed: CTranslate2's greedy output"):
        ct2.export_ct2(ck.path, tmp_path / "ct2")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("overrides", variant_params())
def test_hugging_face_writes_gelu_and_refuses_the_rest(
    overrides: dict, ckpt_dir: Path, spms: dict, tmp_path: Path
) -> None:
    pytest.importorskip("transformers")
    from mtkit.export.hf import export_hf

    if not overrides:
        return  # the default model: tests/export/test_export_hf.py
    ck = variant_ckpt(ckpt_dir, spms, overrides)
    if expected(overrides, 1) != WRITES:
        with pytest.raises(MtkitError, match=refusal(expected(overrides, 1))):
            export_hf(ck.path, tmp_path / "hf")
        assert not (tmp_path / "hf").exists()
        return
    import transformers

    export_hf(ck.path, tmp_path / "hf")  # its own check: logits within 1e-3 of ours
    hf = transformers.MarianMTModel.from_pretrained(str(tmp_path / "hf")).eval()
    src = pad([ids + [EOS_ID] for ids in ck.src.encode(TEST_LINES)])
    with torch.no_grad():
        out = hf.generate(
            input_ids=src,
            attention_mask=src.ne(0),
            max_length=BOUND + 2,
            num_beams=1,
            do_sample=False,
            min_new_tokens=1,
        )
    got = [[t for t in row.tolist()[1:] if t not in (EOS_ID, 0)] for row in out]
    want = [greedy_reference(ck.model, ids, BOUND) for ids in ck.src.encode(TEST_LINES)]
    assert got == want
