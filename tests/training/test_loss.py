"""Label-smoothed cross-entropy against closed forms; eps = 0 is the NLL; padding is ignored."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from mtkit.config import ModelConfig
from mtkit.data.tokenizer import PAD_ID
from mtkit.model.transformer import build_model
from mtkit.training.compiled import loss_function
from mtkit.training.loss import label_smoothed_nll_loss, projected_label_smoothed_nll_loss


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


def _reference(hidden, weight, bias, target, eps):
    """The loss and NLL of the projected logits by autograd, in the inputs' precision."""
    lprobs = F.log_softmax(hidden @ weight.t() + bias, dim=-1)
    keep = target.ne(PAD_ID)
    nll = -(lprobs.gather(1, target[:, None]).squeeze(1) * keep).sum()
    return (1 - eps) * nll + eps * -(lprobs.mean(dim=-1) * keep).sum(), nll


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("rows", [1, 7, 32, 500])
def test_the_projected_loss_and_its_gradients_equal_autograd_in_fp64(eps: float, rows: int):
    """Blocks of 1, 7 (not dividing N), 32 and all rows: the loss, the NLL and the gradients
    of the hidden states and the weight equal autograd's to float64 rounding; padding rows get
    no gradient; the loss's gradient is scaled (3x) as the backward pass is asked."""
    gen = torch.Generator().manual_seed(4)
    hidden = torch.randn(45, 16, generator=gen, dtype=torch.float64)
    weight = torch.randn(50, 16, generator=gen, dtype=torch.float64)
    bias = torch.randn(50, generator=gen, dtype=torch.float64)
    target = torch.randint(0, 50, (45,), generator=gen)
    target[::6] = PAD_ID
    grads = []
    for fused in (False, True):
        h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
        if fused:
            loss, nll = projected_label_smoothed_nll_loss(
                h, w, target, eps, PAD_ID, bias, torch.float64, rows
            )
            assert not nll.requires_grad  # the NLL is for logging
        else:
            loss, nll = _reference(h, w, bias, target, eps)
        (3 * loss).backward()
        grads.append((loss.item(), nll.item(), h.grad, w.grad))
    (loss0, nll0, h0, w0), (loss1, nll1, h1, w1) = grads
    assert loss1 == pytest.approx(loss0, rel=1e-12) and nll1 == pytest.approx(nll0, rel=1e-12)
    assert torch.allclose(h1, h0, rtol=1e-10, atol=1e-12)
    assert torch.allclose(w1, w0, rtol=1e-10, atol=1e-12)
    assert h1[::6].abs().max().item() == 0.0


def test_the_projected_loss_in_bf16_is_autocasts_projection() -> None:
    """bf16: the logits of a block are autocast's bf16 logits, to the bit; the gradients are
    autocast's to bf16 rounding, and come back in the inputs' fp32."""
    gen = torch.Generator().manual_seed(5)
    hidden = torch.randn(40, 32, generator=gen)
    weight = torch.randn(300, 32, generator=gen) / 4
    target = torch.randint(1, 300, (40,), generator=gen)
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = F.linear(h, w)
    loss0, nll0 = label_smoothed_nll_loss(logits, target, 0.1)
    loss0.backward()
    h1, w1 = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    loss1, nll1 = projected_label_smoothed_nll_loss(
        h1, w1, target, 0.1, dtype=torch.bfloat16, rows=40
    )
    loss1.backward()
    assert (loss1.item(), nll1.item()) == pytest.approx((loss0.item(), nll0.item()), rel=1e-6)
    assert h1.grad.dtype == w1.grad.dtype == torch.float32
    assert torch.allclose(h1.grad, h.grad, rtol=2e-2, atol=2e-3)
    assert torch.allclose(w1.grad, w.grad, rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("cfg", [dict(), dict(tie_output=False, share_all_embeddings=False)])
def test_the_training_pass_projecting_in_the_loss_equals_the_model_projecting(cfg) -> None:
    """A model's teacher-forced loss with the projection inside the loss (as training runs on
    CPU) against the model's own logits: the same loss and the same gradient for every weight,
    tied and untied output projections."""
    torch.manual_seed(6)
    model_cfg = ModelConfig(
        src_vocab_size=40,
        tgt_vocab_size=40,
        d_model=16,
        ffn_dim=32,
        heads=2,
        dropout=0.0,
        attention_dropout=0.0,
        encoder_layers=1,
        decoder_layers=1,
        **cfg,
    )
    model = build_model(model_cfg).double()
    src, tgt = torch.randint(4, 40, (3, 7)), torch.randint(4, 40, (3, 6))
    tgt[2, 4:] = PAD_ID
    cpu = torch.device("cpu")
    results = []
    for fused in (None, model):
        model.zero_grad()
        loss, nll = loss_function(model, 0.1, PAD_ID, cpu, None, fused)(src, tgt, tgt)
        loss.backward()
        results.append((loss.item(), nll.item(), [p.grad.clone() for p in model.parameters()]))
    assert results[1][:2] == pytest.approx(results[0][:2], rel=1e-6)
    for fused_grad, grad in zip(results[1][2], results[0][2], strict=True):
        assert torch.allclose(fused_grad, grad, rtol=1e-5, atol=1e-7)
