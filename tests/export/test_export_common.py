"""Export pieces that need neither extra: config mapping, staging, batching, missing extras."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from export_helpers import make_ckpt

from mtkit.config import ModelConfig, SearchConfig, TranslateConfig
from mtkit.data.tokenizer import EOS_ID
from mtkit.engines import load_engine
from mtkit.engines.ct2 import max_target_len
from mtkit.errors import MtkitError
from mtkit.export.ct2 import export_ct2
from mtkit.export.hf import export_hf, generation_defaults, marian_config, marian_state_dict
from mtkit.model.transformer import build_model
from mtkit.staging import staged_dir


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({}, dict(share_encoder_decoder_embeddings=False, tie_word_embeddings=True)),
        (dict(tie_output=False), dict(tie_word_embeddings=False)),
        (
            dict(share_all_embeddings=True, tgt_vocab_size=8000),
            dict(share_encoder_decoder_embeddings=True, tie_word_embeddings=True),
        ),
        (
            dict(src_vocab_size=100, tgt_vocab_size=200),
            dict(vocab_size=100, decoder_vocab_size=200),
        ),
        (
            dict(d_model=64, ffn_dim=96, heads=8, encoder_layers=1, decoder_layers=5),
            dict(
                d_model=64,
                encoder_ffn_dim=96,
                decoder_ffn_dim=96,
                encoder_attention_heads=8,
                decoder_attention_heads=8,
                encoder_layers=1,
                decoder_layers=5,
            ),
        ),
        (dict(max_positions=77), dict(max_position_embeddings=77)),
    ],
)
def test_marian_config(overrides: dict, expected: dict) -> None:
    got = marian_config(ModelConfig(**overrides))
    assert {k: got[k] for k in expected} == expected
    fixed = dict(
        activation_function="relu",
        scale_embedding=True,
        pad_token_id=0,
        eos_token_id=3,
        bos_token_id=2,
        decoder_start_token_id=2,
        forced_eos_token_id=3,
    )
    assert {k: got[k] for k in fixed} == fixed


@pytest.mark.parametrize(
    "overrides, option", [(dict(pre_norm=True), "pre_norm"), (dict(d_model=33, heads=3), "d_model")]
)
def test_marian_refuses(overrides: dict, option: str) -> None:
    with pytest.raises(MtkitError, match=option):
        marian_config(ModelConfig(**overrides))


VARIANT_FIELDS = [
    ("norm", "rmsnorm"),
    ("norm_eps", 1e-6),
    ("positions", "rope"),
    ("positions", "learned"),
    ("max_relative_position", 8),
    ("kv_heads", 2),
    ("ffn_activation", "swiglu"),
    ("bias", False),
    ("decoder_self_attention", "average"),
    ("share_layers", True),
]


@pytest.mark.parametrize("field, value", VARIANT_FIELDS)
def test_marian_refuses_variants_by_name(field: str, value: object) -> None:
    """Marian writes none of these variants: refused, naming the field (one line). (What each
    exporter writes: tests/export/test_export_variants.py.)"""
    cfg = ModelConfig(d_model=16, ffn_dim=32, heads=4, **{field: value})
    with pytest.raises(MtkitError, match=rf"^model\.{field}=.* cannot be exported") as err:
        marian_config(cfg)
    assert "\n" not in str(err.value)


def test_exporters_take_kv_heads_equal_to_heads() -> None:
    """kv_heads = heads is the default model: built from the same seed it has the same weights
    under the same names, Marian accepts it and writes the same tensors; fewer key/value heads
    are refused by name."""
    small = dict(src_vocab_size=30, tgt_vocab_size=30, d_model=16, ffn_dim=32, heads=4)
    models = []
    for kv_heads in (0, 4):
        torch.manual_seed(0)
        models.append(build_model(ModelConfig(**small, kv_heads=kv_heads)))
    default, equal = (m.state_dict() for m in models)
    assert default.keys() == equal.keys()
    assert all(torch.equal(default[k], equal[k]) for k in default)
    written = [marian_state_dict(m) for m in models]  # marian_config's check first
    assert written[0].keys() == written[1].keys()
    assert all(torch.equal(written[0][k], written[1][k]) for k in written[0])
    with pytest.raises(MtkitError, match=r"^model\.kv_heads=2 cannot be exported"):
        marian_config(ModelConfig(**small, kv_heads=2))


def test_generation_defaults() -> None:
    got = generation_defaults(ModelConfig(max_positions=99), SearchConfig(beam=3, lenpen=0.6))
    assert (got["num_beams"], got["length_penalty"], got["max_length"]) == (3, 0.6, 99)
    assert got["early_stopping"] is True and got["forced_eos_token_id"] == 3
    with pytest.raises(MtkitError, match="lenpen_style"):
        generation_defaults(ModelConfig(), SearchConfig(lenpen_style="gnmt"))


@pytest.mark.parametrize(
    "src_len, a, b, min_len, expected",
    [
        (10, 1.2, 10, 1, 22),
        (10, 0.0, 7, 1, 7),
        (3, 0.5, 0, 1, 1),
        (0, 1.0, 0, 0, 0),
        (5, 1.0, 3, 9, 9),
        (50, 2.0, 10, 1, 63),
    ],
)
def test_max_target_len_agrees_with_search(src_len, a, b, min_len, expected) -> None:
    from mtkit.decoding.beam import max_target_lengths

    cfg = SearchConfig(max_len_a=a, max_len_b=b, min_len=min_len)
    assert max_target_len(src_len, cfg, cap=63) == expected
    src = torch.tensor([[5] * src_len + [EOS_ID]])
    assert int(max_target_lengths(src, a, b, min_len, 63)[0]) == expected


def test_staged_dir(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "out"
    with staged_dir(out) as tmp:
        (tmp / "a").write_text("1")
    assert (out / "a").read_text() == "1" and out.stat().st_mode & 0o755 == 0o755
    with pytest.raises(MtkitError, match="already exists"):
        with staged_dir(out):
            pass
    with pytest.raises(RuntimeError):
        with staged_dir(out, force=True) as tmp:
            (tmp / "b").write_text("2")
            raise RuntimeError("export failed half-way")
    assert [p.name for p in out.iterdir()] == ["a"]  # the old export is untouched
    with staged_dir(out, force=True) as tmp:
        (tmp / "b").write_text("2")
    assert [p.name for p in out.iterdir()] == ["b"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["out"]  # no temporaries left


def test_missing_extras_name_the_pip_command(
    monkeypatch: pytest.MonkeyPatch, ckpt_dir: Path, spms: dict, tmp_path: Path
) -> None:
    ck = make_ckpt(ckpt_dir, spms)
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails as if not installed
    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    with pytest.raises(MtkitError, match=r"needs the 'hf' extra.*pip install 'mtkit\[hf\]'"):
        export_hf(ck.path, tmp_path / "hf")
    with pytest.raises(MtkitError, match=r"needs the 'ct2' extra.*pip install 'mtkit\[ct2\]'"):
        export_ct2(ck.path, tmp_path / "ct2")
    with pytest.raises(MtkitError, match=r"pip install 'mtkit\[ct2\]'"):
        load_engine([str(tmp_path)], TranslateConfig(engine="ctranslate2"))
    assert list(tmp_path.iterdir()) == []
