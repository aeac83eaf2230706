"""Attention layers: kv_heads == heads is bit-identical to the attention before the variants;
grouped-query attention equals multi-head attention whose key/value heads are repeated (Ainslie
et al. 2023, section 2.2), in each code path (folded query heads, SDPA's enable_gqa, expanded
keys for Shaw's relative positions); residual connections by hand."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.model.attention import attention, merge_heads, split_heads
from mtkit.model.layers import CrossAttention, PreNormResidual, Residual, SelfAttention
from mtkit.model.positions import ALiBi, AttentionPositions, Rotary, ShawRelative
from mtkit.model.state import KeyValueCache

D, H = 16, 4


class OldSelfAttention(nn.Module):
    """mtkit.model.layers.SelfAttention before the variants, verbatim."""

    def __init__(self, d_model: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, keep: Tensor | None = None, causal: bool = False) -> Tensor:
        q, k, v = (split_heads(t, self.heads) for t in self.qkv(x).chunk(3, dim=-1))
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p, is_causal=causal)
        return self.out(merge_heads(y))

    def step(self, x: Tensor, cache: KeyValueCache) -> Tensor:
        q, k, v = (split_heads(t, self.heads) for t in self.qkv(x).chunk(3, dim=-1))
        keys, values = cache.append(k, v)
        y = F.scaled_dot_product_attention(q, keys, values)
        return self.out(merge_heads(y))


def randn(*shape: int, seed: int = 0) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


KEEP = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])[:, None, None, :]  # (2, 1, 1, 5)


@pytest.mark.parametrize("causal", [False, True])
def test_kv_heads_equal_to_heads_is_the_old_attention_bit_for_bit(causal: bool) -> None:
    torch.manual_seed(0)
    old = OldSelfAttention(D, H, 0.0).eval()
    new = SelfAttention(D, H, H, 0.0, True, AttentionPositions(), causal).eval()
    assert new.state_dict().keys() == old.state_dict().keys()
    new.load_state_dict(old.state_dict())
    x = randn(2, 5, D)
    keep = None if causal else KEEP
    assert torch.equal(new(x, keep), old(x, keep, causal))
    caches = [KeyValueCache.empty(x, 2, H, 5, D // H) for _ in range(2)]
    for t in range(5):
        assert torch.equal(
            new.step(x[:, t : t + 1], caches[0]), old.step(x[:, t : t + 1], caches[1])
        )


def mha_twin(gqa: SelfAttention) -> SelfAttention:
    """The multi-head attention computing what ``gqa`` computes: its key/value projections
    repeated for each query head of their group, fused into one qkv."""
    heads, group, dh = gqa.heads, gqa.heads // gqa.kv_heads, gqa.head_dim
    mha = SelfAttention(D, heads, heads, 0.0, True, gqa.positions, gqa.causal).eval()
    k_w, v_w = gqa.kv.weight.view(2, gqa.kv_heads, dh, D).repeat_interleave(group, dim=1)
    k_b, v_b = gqa.kv.bias.view(2, gqa.kv_heads, dh).repeat_interleave(group, dim=1)
    with torch.no_grad():
        mha.qkv.weight.copy_(torch.cat([gqa.q.weight, k_w.reshape(D, D), v_w.reshape(D, D)]))
        mha.qkv.bias.copy_(torch.cat([gqa.q.bias, k_b.reshape(D), v_b.reshape(D)]))
        mha.out.load_state_dict(gqa.out.state_dict())
    return mha


POSITIONS = {
    "plain": AttentionPositions,
    "rope": lambda: Rotary(D // H, 64),
    "alibi": lambda: ALiBi(H),
    "relative": lambda: ShawRelative(D // H, 2),
}


@pytest.mark.parametrize("kv_heads", [1, 2])
@pytest.mark.parametrize("positions", list(POSITIONS))
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_equals_multi_head_with_repeated_kv(kv_heads, positions, causal) -> None:
    torch.manual_seed(0)
    gqa = SelfAttention(D, H, kv_heads, 0.0, True, POSITIONS[positions](), causal).eval()
    mha = mha_twin(gqa)
    x = randn(2, 5, D)
    keep = None if causal else KEEP
    with torch.no_grad():
        torch.testing.assert_close(gqa(x, keep), mha(x, keep), atol=1e-6, rtol=1e-5)
        if causal:  # decoding: the cache holds kv_heads heads, H / kv_heads times smaller
            caches = gqa.start(x, 2, 5), mha.start(x, 2, 5)
            assert caches[0].nbytes() * (H // kv_heads) == caches[1].nbytes()
            for t in range(5):
                a, b = (m.step(x[:, t : t + 1], c) for m, c in zip((gqa, mha), caches, strict=True))
                torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_grouped_cross_attention_equals_repeated_kv(kv_heads: int) -> None:
    torch.manual_seed(0)
    cross = CrossAttention(D, H, kv_heads, 0.0, True).eval()
    x, memory = randn(2, 3, D), randn(2, 5, D, seed=1)
    source = cross.memory_kv(memory)
    assert source.k.shape == (2, kv_heads, 5, D // H)
    k, v = (t.repeat_interleave(H // kv_heads, dim=1) for t in (source.k, source.v))
    q = split_heads(cross.q(x), H)
    expected = cross.out(merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=KEEP)))
    torch.testing.assert_close(cross(x, source.k, source.v, KEEP), expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("mask", ["none", "padding", "per_head"])
def test_attention_paths_agree(mask: str) -> None:
    """Folded query heads (padding or no mask) and SDPA's enable_gqa (per-head masks) against
    the keys/values expanded by hand."""
    q, k, v = randn(2, 4, 3, 8), randn(2, 2, 5, 8, seed=1), randn(2, 2, 5, 8, seed=2)
    masks = {"none": None, "padding": KEEP, "per_head": randn(4, 3, 5, seed=3)}
    expected = F.scaled_dot_product_attention(
        q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), attn_mask=masks[mask]
    )
    torch.testing.assert_close(attention(q, k, v, masks[mask]), expected)


def test_residuals_by_hand() -> None:
    norm, x = nn.LayerNorm(4), randn(2, 4)
    double = lambda h: 2 * h  # noqa: E731
    torch.testing.assert_close(Residual(norm, 0.0)(x, double), norm(3 * x))
    torch.testing.assert_close(PreNormResidual(norm, 0.0)(x, double), x + 2 * norm(x))


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_cross_attention_probabilities_weigh_the_values(kv_heads: int) -> None:
    """Each head's distribution times the values is what the layer computes: the average the
    alignments read is that of the heads the forward pass uses."""
    torch.manual_seed(0)
    cross = CrossAttention(D, H, kv_heads, 0.0, True).eval()
    x, memory = randn(2, 3, D), randn(2, 5, D, seed=1)
    source = cross.memory_kv(memory)
    probs = cross.probabilities(x, source.k, KEEP)
    assert probs.shape == (2, 3, 5)
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 3))
    assert bool((probs.masked_select(~KEEP[:, 0].expand(2, 3, 5)) == 0).all())
    one = CrossAttention(D, 1, 1, 0.0, True).eval()  # one head: the average is the distribution
    src1 = one.memory_kv(memory)
    weighted = one.out(one.probabilities(x, src1.k, KEEP) @ src1.v[:, 0])
    torch.testing.assert_close(one(x, src1.k, src1.v, KEEP), weighted, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("kv_heads", [4, 2])
@pytest.mark.parametrize("mask_kind", ["none", "keep", "bias", "head_bias"])
def test_attention_in_a_compiled_graph_is_sdpa(monkeypatch, kv_heads: int, mask_kind: str):
    """Inside a compiled decoding graph (no gradients), attention over few queries is written
    out (products, sums, softmax), without SDPA: the same values as SDPA outside one, to
    float32 rounding."""
    from mtkit.model import attention as module

    torch.manual_seed(0)
    q = torch.randn(3, 4, 5, 8)
    k, v = torch.randn(3, kv_heads, 7, 8), torch.randn(3, kv_heads, 7, 8)
    mask = {
        "none": None,
        "keep": torch.rand(3, 1, 1, 7) > 0.3,
        "bias": torch.randn(3, 1, 1, 7),
        "head_bias": torch.randn(4, 5, 7),
    }[mask_kind]
    if mask is not None and mask.dtype == torch.bool:
        mask[:, ..., 0] = True  # every query keeps a key
    expected = module.attention(q, k, v, mask)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert not module.written_out(q, 0.0, False)  # a training graph (gradients): SDPA's
    monkeypatch.setattr(module.F, "scaled_dot_product_attention", None)  # not called
    with torch.no_grad():  # as --compile's decoding step is traced
        got = module.attention(q, k, v, mask)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
