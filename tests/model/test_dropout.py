"""mtkit's CPU dropout: its drop rate and scale, expectation, gradient, seeding, where it
leaves the input alone, and attention's dropout against a written-out reference."""

import math

import pytest
import torch

from mtkit.model.dropout import DRAWS, Dropout, keep_scale

N = 1 << 20


def dropped_share(p: float) -> float:
    return round(p * DRAWS) / DRAWS


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_elements_drop_at_the_rate_asked_and_the_kept_ones_keep_the_expectation(p: float) -> None:
    torch.manual_seed(0)
    y = Dropout(p)(torch.ones(N))
    share = dropped_share(p)
    sigma = math.sqrt(share * (1 - share) / N)
    assert abs(y.eq(0).float().mean().item() - share) < 5 * sigma
    zero, scale = y.unique().tolist()
    assert zero == 0.0 and scale == pytest.approx(1 / (1 - share), rel=1e-6)
    assert abs(y.double().mean().item() - 1.0) < 5 * sigma / (1 - share)


def test_neighbours_drawn_from_one_word_drop_independently() -> None:
    torch.manual_seed(1)
    dropped = keep_scale(torch.Size([N // 4, 4]), 0.3, torch.float32).eq(0)
    share = dropped_share(0.3)
    for a, b in [(0, 1), (1, 2), (2, 3), (0, 3)]:
        both = (dropped[:, a] & dropped[:, b]).float().mean().item()
        sigma = math.sqrt(share**2 * (1 - share**2) / (N // 4))
        assert abs(both - share**2) < 5 * sigma, (a, b)


def test_the_gradient_is_the_mask() -> None:
    torch.manual_seed(2)
    x = (torch.rand(64, 33) + 0.5).requires_grad_()
    y = Dropout(0.2)(x)
    y.backward(torch.ones_like(y))
    assert x.grad is not None
    assert torch.equal(x.grad.eq(0), y.eq(0))
    assert x.grad.unique().tolist() == [0.0, pytest.approx(1 / (1 - dropped_share(0.2)))]


def test_masks_follow_torch_s_generator() -> None:
    torch.manual_seed(3)
    first = Dropout(0.1)(torch.ones(1000))
    second = Dropout(0.1)(torch.ones(1000))
    torch.manual_seed(3)
    assert torch.equal(Dropout(0.1)(torch.ones(1000)), first)
    assert not torch.equal(first, second)


def test_eval_mode_and_p_zero_leave_the_input_alone_and_p_one_drops_all() -> None:
    x = torch.randn(5, 7)
    assert Dropout(0.1).eval()(x) is x
    assert Dropout(0.0)(x) is x
    assert torch.equal(Dropout(1.0)(x), torch.zeros(5, 7))


def test_a_bf16_input_gets_a_bf16_output() -> None:
    y = Dropout(0.1)(torch.ones(100, dtype=torch.bfloat16))
    assert y.dtype == torch.bfloat16


def reference_attention(q, k, v, mask, is_causal, keep):
    """softmax(q k^T / sqrt(Dh) + mask) v in float64, probabilities times ``keep``."""
    h = q.shape[-3]
    k, v = (x.double().repeat_interleave(h // x.shape[-3], dim=-3) for x in (k, v))
    scores = q.double() @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        mask = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask
    return (scores.softmax(-1) * keep) @ v


@pytest.mark.parametrize("kv_heads", [4, 2])
@pytest.mark.parametrize("masking", ["none", "padding", "causal", "bias"])
def test_attention_dropout_on_cpu_drops_probabilities_with_dropout_s_masks(
    kv_heads: int, masking: str
) -> None:
    from mtkit.model.attention import attention

    g = torch.Generator().manual_seed(4)
    q = torch.randn(3, 4, 6, 8, generator=g)
    k, v = (torch.randn(3, kv_heads, 6, 8, generator=g) for _ in range(2))
    mask = {
        "padding": torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4]).bool()[
            :, None, None
        ],
        "bias": torch.randn(1, 4, 6, 6, generator=g),
    }.get(masking)
    causal = masking == "causal"
    torch.manual_seed(5)
    got = attention(q, k, v, mask, 0.3, causal)
    torch.manual_seed(5)
    keep = keep_scale(torch.Size([3, 4, 6, 6]), 0.3, torch.float64)
    assert keep.eq(0).any() and keep.ne(0).any()
    assert torch.allclose(got.double(), reference_attention(q, k, v, mask, causal, keep), atol=1e-6)
    with torch.autocast("cpu", torch.bfloat16):  # bf16 products, a float32 softmax
        torch.manual_seed(5)
        low = attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask, 0.3, causal)
    assert low.dtype == torch.bfloat16
    assert torch.allclose(low.double(), got.double(), atol=0.05)


def test_attention_dropout_s_gradient_is_that_of_its_written_out_reference() -> None:
    from mtkit.model.attention import attention

    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(2, 2, 5, 4, generator=g, dtype=torch.float64) for _ in range(3))
    keep = torch.Size([2, 2, 5, 5])

    def ours(q, k, v):
        torch.manual_seed(7)
        return attention(q, k, v, None, 0.2, True)

    def written(q, k, v):
        torch.manual_seed(7)
        return reference_attention(q, k, v, None, True, keep_scale(keep, 0.2, torch.float64))

    inputs = [x.clone().requires_grad_() for x in (q, k, v)]
    grads = torch.autograd.grad(ours(*inputs).sum(), inputs)
    expected = torch.autograd.grad(written(*inputs).sum(), inputs)
    for a, b in zip(grads, expected, strict=True):
        assert torch.allclose(a, b, atol=1e-12)
