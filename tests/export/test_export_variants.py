"""Every model variant (tests/variants.py) through both exporters: CTranslate2 writes each one
it can represent, and its greedy output equals mtkit's; Hugging Face Marian writes the default
and GELU models; everything else is refused with one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from export_helpers import TEST_LINES, Ckpt, greedy_reference, make_ckpt, pad
from variants import VARIANTS, variant_params

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.data.tokenizer import EOS_ID
from mtkit.errors import MtkitError
from mtkit.export.ct2 import SUPPORTS as CT2_SUPPORTS
from mtkit.export.hf import SUPPORTS as HF_SUPPORTS

BOUND = 8  # greedy tokens per line: short outputs keep 20 exports quick


def writable(overrides: dict, supports: dict) -> bool:
    """Whether an exporter's whitelist covers every field the variant changes."""
    return all(
        supports.get(k, ()) is None or v in supports.get(k, ()) for k, v in overrides.items()
    )


def refused_fields(overrides: dict, supports: dict) -> str:
    """A pattern for the one line naming a field the exporter cannot write."""
    fields = [k for k, v in overrides.items() if not writable({k: v}, supports)]
    return rf"^model\.({'|'.join(fields)})=.* cannot be exported"


def variant_ckpt(ckpt_dir: Path, spms: dict, overrides: dict) -> Ckpt:
    return make_ckpt(ckpt_dir, spms, steps=40, **overrides)  # a few steps: outputs end in EOS


def greedy_lines(ck: Ckpt) -> list[str]:
    ids = ck.src.encode(TEST_LINES)
    return ck.tgt.decode([greedy_reference(ck.model, row, BOUND) for row in ids])


def test_whitelists_name_what_they_write() -> None:
    refused = {name for name, o in VARIANTS.items() if not writable(o, CT2_SUPPORTS)}
    assert refused == {"alibi", "average", "alibi_mqa_geglu", "average_learned_no_bias"}
    hf = {name for name, o in VARIANTS.items() if writable(o, HF_SUPPORTS)}
    assert hf == {"default", "pre_norm", "gelu"}  # pre_norm: refused by Marian's own check


@pytest.mark.parametrize("overrides", variant_params())
def test_ctranslate2_writes_what_it_can_and_decodes_as_mtkit(
    overrides: dict, ckpt_dir: Path, spms: dict, tmp_path: Path
) -> None:
    pytest.importorskip("ctranslate2")
    from mtkit.engines import load_engine
    from mtkit.engines.base import best_texts
    from mtkit.export.ct2 import export_ct2

    ck = variant_ckpt(ckpt_dir, spms, overrides)
    if not writable(overrides, CT2_SUPPORTS):
        with pytest.raises(MtkitError, match=refused_fields(overrides, CT2_SUPPORTS)) as err:
            export_ct2(ck.path, tmp_path / "ct2")
        assert "\n" not in str(err.value) and not (tmp_path / "ct2").exists()
        return
    out = export_ct2(ck.path, tmp_path / "ct2")
    search = SearchConfig(beam=1, max_len_a=0.0, max_len_b=BOUND)
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
    if not writable(overrides, HF_SUPPORTS) or overrides.get("pre_norm"):
        if writable(overrides, HF_SUPPORTS):
            pattern = "pre_norm=true"  # Marian's own check: post-LN only
        else:
            pattern = refused_fields(overrides, HF_SUPPORTS)
        with pytest.raises(MtkitError, match=pattern):
            export_hf(ck.path, tmp_path / "hf")
        assert not (tmp_path / "hf").exists()
        return
    import transformers

    export_hf(ck.path, tmp_path / "hf")  # its own check: logits within 1e-3 of ours
    hf = transformers.MarianMTModel.from_pretrained(str(tmp_path / "hf")).eval()
    src = pad([ids + [EOS_ID] for ids in ck.src.encode(TEST_LINES)])
    with torch.no_grad():
        out = hf.generate(input_ids=src, attention_mask=src.ne(0), max_length=BOUND + 2,
                          num_beams=1, do_sample=False, min_new_tokens=1)  # fmt: skip
    got = [[t for t in row.tolist()[1:] if t not in (EOS_ID, 0)] for row in out]
    want = [greedy_reference(ck.model, ids, BOUND) for ids in ck.src.encode(TEST_LINES)]
    assert got == want
