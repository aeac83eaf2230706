"""Label-smoothed cross-entropy against closed forms; eps = 0 is the NLL; padding is ignored."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from mtkit.data.tokenizer import PAD_ID
from mtkit.training.loss import label_smoothed_nll_loss


@pytest.mark.parametrize(
    "eps, expected",
    [
        # logits [0, ln 3]: p = [1/4, 3/4], target 1 (module docstring's worked example)
        (0.0, math.log(4 / 3)),
        (0.1, 0.9 * math.log(4 / 3) + 0.1 * (math.log(4) + math.log(4 / 3)) / 2),
        (0.5, 0.5 * math.log(4 / 3) + 0.5 * (math.log(4) + math.log(4 / 3)) / 2),
    ],
)
def test_two_way_closed_form(eps: float, expected: float) -> None:
    logits = torch.tensor([[0.0, math.log(3.0)]])
    loss, nll = label_smoothed_nll_loss(logits, torch.tensor([1]), eps, ignore_index=-100)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert nll.item() == pytest.approx(math.log(4 / 3), rel=1e-6)


def test_uniform_logits_cost_log_v_whatever_eps() -> None:
    logits = torch.zeros(3, 5, 10)
    target = torch.full((3, 5), 4)
    for eps in (0.0, 0.1, 0.9):
        loss, _ = label_smoothed_nll_loss(logits, target, eps)
        assert loss.item() == pytest.approx(15 * math.log(10), rel=1e-6)


def test_smoothing_is_cross_entropy_against_the_smoothed_distribution() -> None:
    torch.manual_seed(0)
    logits, target, eps, v = torch.randn(7, 11), torch.randint(1, 11, (7,)), 0.1, 11
    q = torch.full((7, v), eps / v)
    q[torch.arange(7), target] += 1 - eps
    expected = -(q * F.log_softmax(logits, -1)).sum()
    loss, _ = label_smoothed_nll_loss(logits, target, eps)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_padding_contributes_nothing() -> None:
    torch.manual_seed(1)
    logits = torch.randn(2, 4, 9)
    target = torch.tensor([[5, 6, 3, PAD_ID], [7, 3, PAD_ID, PAD_ID]])
    loss, nll = label_smoothed_nll_loss(logits, target, 0.1)
    keep = target.ne(PAD_ID)
    loss_kept, nll_kept = label_smoothed_nll_loss(logits[keep], target[keep], 0.1)
    assert loss.item() == pytest.approx(loss_kept.item(), rel=1e-6)
    assert nll.item() == pytest.approx(nll_kept.item(), rel=1e-6)
    logits[~keep] = 1e4  # anything at padded positions
    assert label_smoothed_nll_loss(logits, target, 0.1)[0].item() == pytest.approx(loss.item())


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 4),
    st.integers(1, 6),
    st.integers(2, 12),
    st.integers(0, 2**16),
)
def test_eps_zero_equals_nll(batch: int, length: int, vocab: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, length, vocab, generator=gen)
    target = torch.randint(0, vocab, (batch, length), generator=gen)
    loss, nll = label_smoothed_nll_loss(logits, target, 0.0)
    expected = F.cross_entropy(
        logits.view(-1, vocab), target.view(-1), ignore_index=PAD_ID, reduction="sum"
    )
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5, abs=1e-5)
    assert nll.item() == loss.item()


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("weights", [(1.0, 0.0), (0.0, 1.0), (0.7, -0.3)])
def test_gradients_equal_autograd_through_torch_cross_entropy(
    eps: float, weights: tuple[float, float]
) -> None:
    """The written-out backward pass against autograd through torch's own label-smoothed
    cross-entropy (the loss) and its plain one (the NLL), padding included."""
    torch.manual_seed(2)
    logits = torch.randn(3, 5, 13)
    target = torch.randint(0, 13, (3, 5))
    target[0, 3:] = PAD_ID
    ours = logits.clone().requires_grad_()
    loss, nll = label_smoothed_nll_loss(ours, target, eps)
    (weights[0] * loss + weights[1] * nll).backward()
    theirs = logits.clone().requires_grad_()
    flat, gold = theirs.view(-1, 13), target.view(-1)
    loss_t = F.cross_entropy(flat, gold, ignore_index=PAD_ID, label_smoothing=eps, reduction="sum")
    nll_t = F.cross_entropy(flat, gold, ignore_index=PAD_ID, reduction="sum")
    (weights[0] * loss_t + weights[1] * nll_t).backward()
    assert loss.item() == pytest.approx(loss_t.item(), rel=1e-5)
    assert nll.item() == pytest.approx(nll_t.item(), rel=1e-5)
    assert torch.allclose(ours.grad, theirs.grad, rtol=1e-5, atol=1e-6)
    assert ours.grad[0, 3:].abs().max().item() == 0.0  # padding gets no gradient


def test_a_bf16_pass_gets_a_bf16_gradient() -> None:
    torch.manual_seed(3)
    logits = torch.randn(6, 10).to(torch.bfloat16).requires_grad_()
    loss, _ = label_smoothed_nll_loss(logits, torch.randint(1, 10, (6,)), 0.1)
    assert loss.dtype == torch.float32
    loss.backward()
    assert logits.grad is not None and logits.grad.dtype == torch.bfloat16
