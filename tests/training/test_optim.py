"""The inverse-sqrt schedule at chosen steps, Adam's settings, and gradient clipping."""

import math

import pytest
import torch

from mtkit.config import ModelConfig, TrainConfig
from mtkit.model.transformer import build_model
from mtkit.training.optim import build_optimizer, build_scheduler, inverse_sqrt_lr


@pytest.mark.parametrize(
    "step, peak, warmup, init, expected",
    [
        (0, 1e-3, 4, 0.0, 0.0),
        (1, 1e-3, 4, 0.0, 2.5e-4),
        (2, 1e-3, 4, 0.0, 5e-4),
        (4, 1e-3, 4, 0.0, 1e-3),
        (16, 1e-3, 4, 0.0, 5e-4),  # peak * sqrt(4 / 16)
        (400, 1e-3, 4, 0.0, 1e-4),
        (0, 7e-4, 4000, 1e-7, 1e-7),  # fairseq: warmup starts at warmup_init_lr
        (2000, 7e-4, 4000, 1e-7, 1e-7 + 2000 * (7e-4 - 1e-7) / 4000),
        (4000, 7e-4, 4000, 1e-7, 7e-4),
        (16000, 7e-4, 4000, 1e-7, 3.5e-4),
        (0, 1e-3, 0, 0.0, 1e-3),  # no warmup
        (4, 1e-3, 0, 0.0, 5e-4),
    ],
)
def test_inverse_sqrt_values(step: int, peak: float, warmup: int, init: float, expected: float):
    assert inverse_sqrt_lr(step, peak, warmup, init) == pytest.approx(expected, rel=1e-12)


def tiny_model() -> torch.nn.Module:
    return build_model(
        ModelConfig(
            src_vocab_size=20,
            tgt_vocab_size=20,
            d_model=16,
            ffn_dim=32,
            heads=2,
            encoder_layers=1,
            decoder_layers=1,
        )
    )


def test_scheduler_drives_the_optimizer() -> None:
    cfg = TrainConfig(lr=1e-3, warmup_updates=4, warmup_init_lr=0.0)
    model = tiny_model()
    optimizer = build_optimizer(model, cfg)
    scheduler = build_scheduler(optimizer, cfg)
    seen = []
    for _ in range(17):
        seen.append(optimizer.param_groups[0]["lr"])  # the rate update k runs with
        optimizer.step()
        scheduler.step()
    expected = [inverse_sqrt_lr(k, 1e-3, 4, 0.0) for k in range(17)]
    assert seen == pytest.approx(expected, rel=1e-12)


def test_adam_settings_and_shared_parameters_once() -> None:
    model = build_model(
        ModelConfig(
            src_vocab_size=20,
            tgt_vocab_size=20,
            d_model=16,
            ffn_dim=32,
            heads=2,
            encoder_layers=1,
            decoder_layers=1,
            share_all_embeddings=True,
        )
    )
    optimizer = build_optimizer(model, TrainConfig())
    group = optimizer.param_groups[0]
    assert group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9
    assert group["weight_decay"] == 0.0
    ids = [id(p) for p in group["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))


def test_gradient_clipping(tmp_path) -> None:
    from mtkit.training.batching import Batch, Group
    from mtkit.training.step import Stepper

    cfg = TrainConfig(device="cpu", clip_norm=1e-3, lr=1.0, warmup_updates=0, run_dir=str(tmp_path))
    mcfg = ModelConfig(
        src_vocab_size=20,
        tgt_vocab_size=20,
        d_model=16,
        ffn_dim=32,
        heads=2,
        encoder_layers=1,
        decoder_layers=1,
        dropout=0.0,
    )
    step = Stepper(cfg, mcfg)
    tokens = torch.tensor([[5, 6, 7, 3]])
    batch = Batch(src=tokens, tgt_in=torch.tensor([[2, 5, 6, 7]]), tgt_out=tokens)
    step.forward_backward(Group([batch], [1.0], ntokens=4, sentences=1, consumed=1))
    before = {n: p.detach().clone() for n, p in step.model.named_parameters()}
    grads = [p.grad for p in step.model.parameters() if p.grad is not None]
    gnorm, stepped = step.optimizer_step()
    assert gnorm > 1e-3 and stepped  # the norm before clipping
    clipped = math.sqrt(sum(float(g.pow(2).sum()) for g in grads))
    assert clipped == pytest.approx(1e-3, rel=1e-4)
    assert any(not torch.equal(before[n], p) for n, p in step.model.named_parameters())
