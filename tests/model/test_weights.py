"""mtkit.model.weights: the description of every variant's weights round-trips bit for bit,
its split projections compute what the model's fused ones do, and a tensor it does not know (a
parameter added or renamed in the model) is refused by name, here rather than in an exporter."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from variants import VARIANTS

from mtkit.config import ModelConfig
from mtkit.errors import MtkitError
from mtkit.model.attention import split_heads
from mtkit.model.average_attention import AverageAttention
from mtkit.model.feedforward import ACTIVATIONS, FeedForward
from mtkit.model.layers import CrossAttention, SelfAttention
from mtkit.model.transformer import Transformer, build_model
from mtkit.model.weights import (
    AttentionWeights,
    AverageAttentionWeights,
    FeedForwardWeights,
    LinearWeights,
    ModelWeights,
    load_weights,
    read_weights,
    state_dict_from,
)

D, H = 16, 4
# beyond tests/variants.py: the general switches that change which tensors exist
EMBEDDINGS = {
    "shared_embeddings": dict(share_all_embeddings=True),
    "own_output": dict(tie_output=False),
    "output_bias": dict(output_bias=True),
}
ALL = {**VARIANTS, **EMBEDDINGS}


def small(overrides: dict, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    sizes = dict(src_vocab_size=30, tgt_vocab_size=30, d_model=D, ffn_dim=32, heads=H)
    cfg = ModelConfig(**sizes, encoder_layers=2, decoder_layers=3, max_positions=64, **overrides)
    model = build_model(cfg).eval()
    if model.output_bias is not None:
        model.output_bias.normal_()  # not all zero, so that it is seen to travel
    return model


def variants() -> list:
    return [pytest.param(overrides, id=name) for name, overrides in ALL.items()]


@pytest.mark.parametrize("overrides", variants())
def test_read_then_state_dict_from_is_the_state_dict_bit_for_bit(overrides: dict) -> None:
    model = small(overrides)
    state = state_dict_from(model.cfg, read_weights(model))
    want = model.state_dict()
    assert list(state) == list(want)  # the same names, in the model's order
    for name, tensor in want.items():
        assert state[name].dtype == tensor.dtype and torch.equal(state[name], tensor), name


@pytest.mark.parametrize("overrides", variants())
def test_load_weights_makes_another_model_the_same(overrides: dict) -> None:
    model, other = small(overrides, seed=0), small(overrides, seed=1)
    load_weights(other, read_weights(model))
    src, tgt = torch.randint(4, 30, (2, 7)), torch.randint(4, 30, (2, 5))
    with torch.no_grad():
        assert torch.equal(other(src, tgt), model(src, tgt))


def lin(x: Tensor, linear: LinearWeights) -> Tensor:
    return F.linear(x, linear.weight, linear.bias)


def test_the_fused_qkv_rows_are_q_then_k_then_v() -> None:
    """x @ W_q^T (+ b_q) is the first D columns of the fused projection's output, k the next."""
    model = small({})
    fused = model.encoder[0].attn.qkv
    attention = read_weights(model).encoder[0].self_attention
    x = torch.randn(3, 5, D)
    with torch.no_grad():
        y = fused(x)
    for i, part in enumerate((attention.q, attention.k, attention.v)):
        assert torch.allclose(lin(x, part), y[..., i * D : (i + 1) * D], atol=1e-6)


def check_attention(m: SelfAttention | CrossAttention, w: AttentionWeights, x: Tensor) -> None:
    """The split projections give the model's queries, keys and values head by head."""
    kv_heads = m.kv_heads
    if isinstance(m, SelfAttention):
        q, k, v = m.project(x)
    else:
        source = m.memory_kv(x)
        q, k, v = split_heads(m.q(x), m.heads), source.k, source.v
    assert w.k.weight.shape == w.v.weight.shape == (kv_heads * D // H, D)
    for got, part, heads in ((q, w.q, H), (k, w.k, kv_heads), (v, w.v, kv_heads)):
        assert torch.allclose(got, split_heads(lin(x, part), heads), atol=1e-6)
    assert torch.allclose(m.out(x), lin(x, w.out), atol=1e-6)


def check_ffn(m: FeedForward, w: FeedForwardWeights, x: Tensor) -> None:
    act = ACTIVATIONS[m.activation]
    hidden = act(lin(x, w.fc1)) if w.gate is None else act(lin(x, w.gate)) * lin(x, w.fc1)
    assert (w.gate is None) == (m.gate is None)
    assert torch.allclose(m(x), lin(hidden, w.fc2), atol=1e-6)


def check_average(m: AverageAttention, w: AverageAttentionWeights, x: Tensor) -> None:
    """Zhang et al. (2018) eqs. 1-2 from the description: g = FFN(average), gates over [y; g]."""
    average = x.cumsum(dim=1) / torch.arange(1, x.shape[1] + 1)[:, None]
    assert w.ffn is not None and m.ffn is not None
    check_ffn(m.ffn, w.ffn, average)
    g = m.ffn(average)
    both = torch.cat((x, g), dim=-1)
    i, f = lin(both, w.input_gate).sigmoid(), lin(both, w.forget_gate).sigmoid()
    assert torch.allclose(m(x), i * x + f * g, atol=1e-6)


@pytest.mark.parametrize("overrides", variants())
@torch.no_grad()
def test_split_projections_compute_what_the_model_computes(overrides: dict) -> None:
    model = small(overrides)
    weights = read_weights(model)
    x = torch.randn(2, 6, D)
    for layer, w in zip(model.encoder_stack(), weights.encoder, strict=True):
        check_attention(layer.attn, w.self_attention, x)
        check_ffn(layer.ffn, w.ffn, x)
    for layer, w in zip(model.decoder_stack(), weights.decoder, strict=True):
        if isinstance(layer.self_attn, AverageAttention):
            assert isinstance(w.self_attention, AverageAttentionWeights)
            check_average(layer.self_attn, w.self_attention, x)
        else:
            assert isinstance(w.self_attention, AttentionWeights)
            check_attention(layer.self_attn, w.self_attention, x)
        check_attention(layer.cross_attn, w.cross_attention, x)
        check_ffn(layer.ffn, w.ffn, x)


@pytest.mark.parametrize("overrides", variants())
def test_what_a_variant_has_and_lacks(overrides: dict) -> None:
    cfg = small(overrides).cfg
    weights = read_weights(small(overrides))
    layer = weights.decoder[0]
    norms = [layer.self_attention_norm, layer.cross_attention_norm, layer.ffn_norm]
    assert all((n.bias is not None) == (cfg.bias and cfg.norm == "layernorm") for n in norms)
    assert (layer.cross_attention.q.bias is not None) == cfg.bias
    assert (layer.ffn.gate is not None) == (cfg.ffn_activation in ("swiglu", "geglu"))
    relative = weights.encoder[0].self_attention.relative
    assert (relative is not None) == (cfg.positions == "relative")
    assert (weights.src_positions is not None) == (cfg.positions == "learned")
    assert (weights.encoder_norm is not None) == (weights.decoder_norm is not None) == cfg.pre_norm
    assert (weights.output is None) == (cfg.tie_output or cfg.share_all_embeddings)
    assert (weights.output_bias is not None) == cfg.output_bias
    assert (weights.src_embedding is weights.tgt_embedding) == cfg.share_all_embeddings
    assert len(weights.encoder) == cfg.encoder_layers and len(weights.decoder) == 3
    assert (weights.decoder[0] is weights.decoder[2]) == cfg.share_layers


# -- a tensor without a place is refused by name --------------------------------------------------


def test_read_weights_refuses_a_parameter_it_does_not_know() -> None:
    """A parameter added to a module (or one renamed beside the attribute read here) is left
    over: refused, naming its state-dict key."""
    model = small({})
    model.encoder[1].ffn.scale = nn.Parameter(torch.ones(D))
    with pytest.raises(MtkitError, match=r"^read_weights: encoder\.1\.ffn\.scale has no place"):
        read_weights(model)


def test_read_weights_fails_on_a_renamed_projection() -> None:
    """A projection renamed in the model (here ``qkv`` -> ``in_proj``) breaks this module's
    reading, not an exporter's."""
    model = small({})
    attention = model.decoder[0].self_attn
    attention.in_proj = attention.qkv
    del attention.qkv
    with pytest.raises(AttributeError, match="qkv"):
        read_weights(model)


def weights_of(overrides: dict) -> tuple[ModelConfig, ModelWeights]:
    model = small(overrides)
    return model.cfg, read_weights(model)


def test_state_dict_from_refuses_a_missing_bias_by_name() -> None:
    cfg, weights = weights_of({})
    weights.encoder[1].ffn.fc2.bias = None
    with pytest.raises(MtkitError, match=r"no value for encoder\.1\.ffn\.fc2\.bias"):
        state_dict_from(cfg, weights)


def test_state_dict_from_refuses_a_surplus_tensor() -> None:
    cfg, weights = weights_of({})
    gate = weights.decoder[2].ffn.fc1
    weights.decoder[2].ffn.gate = gate
    with pytest.raises(MtkitError, match=r"decoder\[2\]\.ffn\.gate given, but the model has none"):
        state_dict_from(cfg, weights)
    cfg, weights = weights_of(dict(bias=False))
    weights.encoder[0].self_attention_norm.bias = torch.zeros(D)
    with pytest.raises(MtkitError, match=r"encoder\[0\]\.self_attention_norm bias given"):
        state_dict_from(cfg, weights)


def test_state_dict_from_refuses_a_wrong_shape_by_name() -> None:
    cfg, weights = weights_of(dict(kv_heads=2))
    attention = weights.decoder[0].cross_attention
    attention.k = attention.q  # D rows where 2 heads of D / 4 belong
    with pytest.raises(MtkitError, match=r"decoder\.0\.cross_attn\.kv\.weight has shape"):
        state_dict_from(cfg, weights)


def test_state_dict_from_refuses_two_values_for_one_shared_tensor() -> None:
    cfg, weights = weights_of(dict(share_layers=True))
    weights.encoder[1] = read_weights(small(dict(share_layers=True), seed=1)).encoder[1]
    with pytest.raises(MtkitError, match=r"two different values for encoder\.0\."):
        state_dict_from(cfg, weights)
    cfg, weights = weights_of(dict(share_all_embeddings=True))
    weights.tgt_embedding = weights.tgt_embedding + 1
    with pytest.raises(MtkitError, match=r"two different values for (src|tgt)_embed\.weight"):
        state_dict_from(cfg, weights)


def test_state_dict_from_refuses_another_sublayer_kind() -> None:
    cfg, weights = weights_of(dict(decoder_self_attention="average"))
    weights.decoder[0].self_attention = weights.decoder[0].cross_attention
    with pytest.raises(MtkitError, match=r"decoder\[0\]\.self_attention is AttentionWeights"):
        state_dict_from(cfg, weights)


def test_state_dict_from_refuses_a_projection_of_a_tied_model() -> None:
    cfg, weights = weights_of({})
    weights.output = weights.tgt_embedding.clone()
    with pytest.raises(MtkitError, match="output given, but the model has none"):
        state_dict_from(cfg, weights)
