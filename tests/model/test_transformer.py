"""Model invariants over every variant (tests/variants.py): cached decoding equals the full
pass, padding invariance, causality; parameter names and counts per variant; config checks.
(The decoding state's reorders: test_state.py.)"""

import pytest
import torch
from model_helpers import assert_cache_equals_full, batch, tiny
from variants import VARIANTS, variant_params

from mtkit.config import ModelConfig, from_dict
from mtkit.data.tokenizer import BOS_ID
from mtkit.errors import MtkitError
from mtkit.model.builders import check_model_config
from mtkit.model.positions import sinusoidal_positions
from mtkit.model.transformer import (
    build_model,
    count_parameters,
    resolve_model_config,
)


@pytest.mark.parametrize("variant", variant_params())
def test_cached_steps_equal_full_forward(variant: dict) -> None:
    model = tiny(**variant)
    src = batch([7, 4, 5], 23)
    tgt = torch.cat([torch.full((3, 1), BOS_ID), batch([6, 6, 6], 29, seed=2)], dim=1)
    assert_cache_equals_full(model, src, tgt)


@pytest.mark.parametrize("share", [False, True])
def test_same_seed_same_weights(share: bool) -> None:
    """Initialisation draws in a fixed order: separate source and target embeddings once came
    from a set, whose order follows memory addresses, and two builds could differ."""
    vocab = 29 if share else 23
    first = tiny(src_vocab=vocab, share_all_embeddings=share).state_dict()
    for _ in range(10):
        garbage = [torch.nn.Embedding(5, 3) for _ in range(7)]  # shift memory addresses
        again = tiny(src_vocab=vocab, share_all_embeddings=share).state_dict()
        assert all(torch.equal(first[k], again[k]) for k in first), garbage
    assert torch.equal(first["src_embed.weight"][1:], first["tgt_embed.weight"][1:]) == share


@pytest.mark.parametrize("variant", variant_params())
def test_padding_invariance(variant: dict) -> None:
    model = tiny(**variant)
    lengths = [3, 8, 5]
    src = batch(lengths, 23)
    tgt = torch.cat([torch.full((3, 1), BOS_ID), batch([4, 2, 6], 29, seed=3)], dim=1)
    tgt_lengths = [5, 3, 7]
    with torch.no_grad():
        together = model(src, tgt)
        for i, (n, m) in enumerate(zip(lengths, tgt_lengths, strict=True)):
            alone = model(src[i : i + 1, :n], tgt[i : i + 1, :m])
            torch.testing.assert_close(together[i, :m], alone[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", variant_params())
def test_decoder_is_causal(variant: dict) -> None:
    model = tiny(**variant)
    src = batch([6], 23)
    tgt = torch.tensor([[BOS_ID, 5, 6, 7, 8]])
    changed = tgt.clone()
    changed[0, 3:] = torch.tensor([20, 21])
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


def test_embeddings_are_tied_and_shared() -> None:
    model = tiny(share_all_embeddings=False, tie_output=True)
    assert model.output is None
    cfg = ModelConfig(
        src_vocab_size=30,
        tgt_vocab_size=30,
        d_model=16,
        ffn_dim=32,
        heads=2,
        encoder_layers=1,
        decoder_layers=1,
        share_all_embeddings=True,
    )
    shared = build_model(cfg)
    assert shared.src_embed.weight is shared.tgt_embed.weight
    untied = build_model(
        ModelConfig(
            src_vocab_size=30,
            tgt_vocab_size=30,
            d_model=16,
            ffn_dim=32,
            heads=2,
            encoder_layers=1,
            decoder_layers=1,
            tie_output=False,
        )
    )
    assert count_parameters(untied) == count_parameters(shared) + 2 * 30 * 16


def test_positions_match_formula() -> None:
    table = sinusoidal_positions(50, 8)
    pos, i = 7, 2
    assert table[pos, i].item() == pytest.approx(
        torch.sin(torch.tensor(pos / 10000 ** (2 * i / 8))).item(), abs=1e-6
    )
    assert table[pos, 4 + i].item() == pytest.approx(
        torch.cos(torch.tensor(pos / 10000 ** (2 * i / 8))).item(), abs=1e-6
    )


def test_presets_and_errors() -> None:
    base = resolve_model_config("transformer-base", 100, 100)
    assert (base.d_model, base.ffn_dim, base.heads, base.encoder_layers) == (512, 2048, 8, 6)
    big = resolve_model_config("transformer-big", 100, 100, {"decoder_layers": 2})
    assert (big.d_model, big.dropout, big.decoder_layers) == (1024, 0.3, 2)
    with pytest.raises(MtkitError, match="unknown preset"):
        resolve_model_config("nope", 10, 10)
    with pytest.raises(MtkitError, match="divisible"):
        build_model(ModelConfig(d_model=30, heads=4))
    with pytest.raises(MtkitError, match="max_positions"):
        tiny(max_positions=4).encode(batch([6], 23))


# ---------------------------------------------------------------------------------------------
# Parameter names: what each variant adds, renames or drops (the exporters read these)

DEFAULT_KEYS = set(tiny().state_dict())


@pytest.mark.parametrize(
    "name, present, absent",
    [
        (
            "default",
            {
                "encoder.1.attn.qkv.weight": (96, 32),
                "decoder.1.cross_attn.kv.weight": (64, 32),
                "decoder.1.self_res.norm.bias": (32,),
            },
            ["output.weight"],
        ),
        ("rope", {}, []),
        ("alibi", {}, []),
        ("gelu", {}, []),
        ("pre_norm", {"encoder_norm.weight": (32,), "decoder_norm.bias": (32,)}, []),
        ("rmsnorm", {"encoder.0.attn_res.norm.weight": (32,)}, ["encoder.0.attn_res.norm.bias"]),
        (
            "learned",
            {"src_positions.table.weight": (1024, 32), "tgt_positions.table.weight": (1024, 32)},
            [],
        ),
        (
            "relative",
            {
                "encoder.0.attn.positions.keys.weight": (7, 8),
                "encoder.1.attn.positions.values.weight": (7, 8),
                "decoder.0.self_attn.positions.keys.weight": (7, 8),
                "decoder.1.self_attn.positions.values.weight": (7, 8),
            },
            [],
        ),
        (
            "grouped_query",
            {
                "encoder.0.attn.q.weight": (32, 32),
                "encoder.0.attn.kv.weight": (32, 32),
                "decoder.1.self_attn.kv.bias": (32,),
                "decoder.0.cross_attn.kv.weight": (32, 32),
            },
            ["encoder.0.attn.qkv.weight", "decoder.0.self_attn.qkv.weight"],
        ),
        (
            "multi_query",
            {"encoder.0.attn.kv.weight": (16, 32), "decoder.0.cross_attn.kv.weight": (16, 32)},
            ["decoder.1.self_attn.qkv.bias"],
        ),
        (
            "swiglu",
            {
                "encoder.0.ffn.gate.weight": (40, 32),
                "encoder.0.ffn.fc1.weight": (40, 32),
                "decoder.1.ffn.fc2.weight": (32, 40),
            },
            [],
        ),
        (
            "average",
            {
                "decoder.0.self_attn.gate.weight": (64, 64),
                "decoder.1.self_attn.ffn.fc1.weight": (64, 32),
                "decoder.1.self_attn.ffn.fc2.bias": (32,),
            },
            ["decoder.0.self_attn.qkv.weight", "decoder.0.self_attn.out.weight"],
        ),
        (
            "shared_layers",
            {"encoder.0.attn.qkv.weight": (96, 32)},
            ["encoder.1.attn.qkv.weight", "decoder.1.ffn.fc1.weight"],
        ),
    ],
)
def test_parameter_names_of_each_variant(name: str, present: dict, absent: list) -> None:
    state = tiny(**VARIANTS[name]).state_dict()
    assert {k: tuple(state[k].shape) for k in present} == present
    assert not set(absent) & set(state)
    renamed = set(present) | set(absent)
    unchanged = DEFAULT_KEYS - renamed - {k for k in DEFAULT_KEYS if k.endswith(".bias")}
    if name not in ("shared_layers", "grouped_query", "multi_query", "average"):
        assert unchanged <= set(state)  # a variant changes only the names it says


def test_bias_false_drops_every_bias() -> None:
    model = tiny(**VARIANTS["llama_like"])
    assert not [k for k in model.state_dict() if k.endswith(".bias")]
    assert all(m.bias is None for m in model.modules() if isinstance(m, torch.nn.Linear))


def test_shared_layers_apply_one_layer_at_every_depth() -> None:
    plain, shared = tiny(), tiny(share_layers=True)
    assert len(shared.encoder) == len(shared.decoder) == 1
    assert [id(x) for x in shared.decoder_stack()] == [id(shared.decoder[0])] * 2
    per_layer = sum(p.numel() for p in plain.encoder[1].parameters())
    per_layer += sum(p.numel() for p in plain.decoder[1].parameters())
    assert count_parameters(shared) == count_parameters(plain) - per_layer
    with torch.no_grad():
        state = shared.start_state(shared.encode(batch([5], 23)), max_len=3)
    assert len(state.layers) == 2 and state.layers[0].own is not state.layers[1].own


# ---------------------------------------------------------------------------------------------
# Config checks and presets


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(kv_heads=3), r"^model\.kv_heads=3 must divide model\.heads=4$"),
        (dict(kv_heads=8), r"model\.kv_heads=8 must divide model\.heads=4"),
        (dict(kv_heads=-1), r"model\.kv_heads must be >= 0"),
        (dict(positions="rope", kv_heads=3), r"model\.kv_heads=3 must divide model\.heads=4"),
        (
            dict(positions="rope", d_model=12, heads=4),
            r"model\.positions=rope needs an even "
            r"head width, but model\.d_model=12 / model\.heads=4 = 3",
        ),
        (
            dict(decoder_self_attention="average", positions="alibi"),
            r"model\.decoder_self_attention=average has no attention scores for "
            r"model\.positions=alibi",
        ),
        (dict(norm="batchnorm"), r"model\.norm must be one of layernorm, rmsnorm"),
        (dict(positions="t5"), r"model\.positions must be one of sinusoidal, learned"),
        (dict(ffn_activation="tanh"), r"model\.ffn_activation must be one of relu"),
        (dict(decoder_self_attention="lstm"), r"model\.decoder_self_attention must be one of"),
        (dict(norm_eps=0.0), r"model\.norm_eps must be > 0"),
        (dict(max_relative_position=0), r"model\.max_relative_position must be >= 1"),
        (
            dict(share_all_embeddings=True, src_vocab_size=23),
            r"model\.share_all_embeddings needs one joint vocabulary",
        ),
    ],
)
def test_impossible_combinations_are_refused_in_one_line(overrides: dict, message: str) -> None:
    values = dict(src_vocab_size=29, tgt_vocab_size=29, d_model=32, ffn_dim=64, heads=4)
    cfg = ModelConfig(**{**values, **overrides})
    with pytest.raises(MtkitError, match=message) as err:
        check_model_config(cfg)
    assert "\n" not in str(err.value)
    with pytest.raises(MtkitError, match=message):
        build_model(cfg)


def test_old_model_configs_fill_the_new_fields_with_defaults() -> None:
    old = {"src_vocab_size": 10, "tgt_vocab_size": 10, "d_model": 16, "heads": 2}
    cfg = from_dict(ModelConfig, old)
    assert (
        cfg.norm,
        cfg.positions,
        cfg.kv_heads,
        cfg.ffn_activation,
        cfg.bias,
        cfg.decoder_self_attention,
        cfg.share_layers,
    ) == ("layernorm", "sinusoidal", 0, "relu", True, "attention", False)


def test_deep_shallow_preset_is_one_flag() -> None:
    cfg = resolve_model_config("transformer-deep-shallow", 100, 100)
    assert (cfg.d_model, cfg.encoder_layers, cfg.decoder_layers) == (256, 6, 1)


def test_modern_preset_is_the_small_model_with_pre_norm_and_rotary_positions() -> None:
    small = resolve_model_config("transformer-small", 100, 100)
    modern = resolve_model_config("transformer-small-modern", 100, 100)
    changed = {k for k, v in vars(modern).items() if getattr(small, k) != v}
    assert changed == {"pre_norm", "positions"}
    assert (modern.pre_norm, modern.positions) == (True, "rope")


def test_speed_preset_is_the_modern_model_with_multi_query_attention() -> None:
    modern = resolve_model_config("transformer-small-modern", 100, 100)
    fast = resolve_model_config("transformer-small-modern-mqa", 100, 100)
    changed = {k for k, v in vars(fast).items() if getattr(modern, k) != v}
    assert changed == {"kv_heads"} and fast.kv_heads == 1


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_query_projections_start_at_the_full_head_scale(kv_heads: int) -> None:
    """Multi-/grouped-query q and kv projections are drawn from the Xavier-uniform range of the
    full-head layout they replace (fused qkv: fan-out 3D; cross-attention kv: 2D), not from
    their own smaller fan-out, so that the variant changes the head count only."""
    d = 128
    cfg = ModelConfig(
        src_vocab_size=50,
        tgt_vocab_size=50,
        d_model=d,
        ffn_dim=256,
        heads=4,
        kv_heads=kv_heads,
        encoder_layers=1,
        decoder_layers=1,
    )
    torch.manual_seed(0)
    model = build_model(cfg)
    full = {"self": (6 / (4 * d)) ** 0.5, "cross": (6 / (3 * d)) ** 0.5}
    weights = {
        "self": [
            model.encoder[0].attn.q.weight,
            model.encoder[0].attn.kv.weight,
            model.decoder[0].self_attn.q.weight,
            model.decoder[0].self_attn.kv.weight,
        ],
        "cross": [model.decoder[0].cross_attn.kv.weight],
    }
    for kind, tensors in weights.items():
        for w in tensors:
            assert 0.97 * full[kind] < w.abs().max().item() <= full[kind], kind


@pytest.mark.parametrize("variant", variant_params())
def test_cross_attention_reads_one_layer_of_the_teacher_forced_pass(variant: dict) -> None:
    """Rows are distributions over the real source tokens; a sentence's rows do not depend on
    the batch it is in (padding); the layer chosen matters."""
    model = tiny(**variant)
    src = batch([7, 4], 23)
    tgt = torch.cat([torch.full((2, 1), BOS_ID), batch([5, 3], 29, seed=2)], dim=1)
    with torch.no_grad():
        probs = [model.cross_attention(src, tgt, layer) for layer in (0, 1)]
        alone = model.cross_attention(src[1:, :4], tgt[1:, :4], 1)
    assert probs[0].shape == (2, 6, 7)
    torch.testing.assert_close(probs[1].sum(-1), torch.ones(2, 6))
    assert bool((probs[1][1, :, 4:] == 0).all())  # padding gets nothing
    torch.testing.assert_close(probs[1][1:, :4, :4], alone, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(probs[0], probs[1])
