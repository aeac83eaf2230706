"""Adam with linear warmup and inverse-square-root decay (Vaswani et al., 2017, section 5.3).

The schedule is fairseq's ``inverse_sqrt``: over the first ``warmup`` updates the learning rate
rises linearly from ``init_lr`` to ``peak``; afterwards it decays as ``peak * sqrt(warmup / step)``.
Update k (counting from 1) runs with ``inverse_sqrt_lr(k - 1)``, as in fairseq, whose trainer
sets the rate for the next update after each step.
"""

from __future__ import annotations

import math

from torch import nn
from torch.optim import AdamW, Optimizer
from torch.optim.lr_scheduler import LambdaLR

from mtkit.config import TrainConfig


def inverse_sqrt_lr(step: int, peak: float, warmup: int, init_lr: float = 0.0) -> float:
    """The learning rate after ``step`` updates.

    >>> inverse_sqrt_lr(2, peak=1e-3, warmup=4)
    0.0005
    >>> inverse_sqrt_lr(16, peak=1e-3, warmup=4)
    0.0005

    ``warmup`` = 0 skips the warmup: ``peak / sqrt(max(step, 1))``.
    """
    if warmup <= 0:
        return peak / math.sqrt(max(step, 1))
    if step < warmup:
        return init_lr + step * (peak - init_lr) / warmup
    return peak * math.sqrt(warmup / step)


def build_optimizer(model: nn.Module, cfg: TrainConfig) -> Optimizer:
    """Adam with fairseq's decoupled weight decay (AdamW; with weight_decay 0 it is plain Adam).

    Parameters shared between modules (tied embeddings) appear once. The fused implementation
    (one kernel per parameter, not a loop of ten ops each) on CPU and CUDA: a tenth of an update
    on a 2-core CPU was the per-parameter loop (docs/train.md). A resumed run keeps the
    implementation its saved state names.
    """
    betas = (float(cfg.adam_betas[0]), float(cfg.adam_betas[1]))
    params = list(model.parameters())
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params)
    return AdamW(
        params,
        lr=cfg.lr,
        betas=betas,
        eps=cfg.adam_eps,
        weight_decay=cfg.weight_decay,
        fused=fused or None,
    )


def build_scheduler(optimizer: Optimizer, cfg: TrainConfig) -> LambdaLR:
    """``inverse_sqrt_lr`` as a LambdaLR over the optimizer's base rate ``cfg.lr``."""
    peak, warmup, init_lr = cfg.lr, cfg.warmup_updates, cfg.warmup_init_lr
    return LambdaLR(optimizer, lambda step: inverse_sqrt_lr(step, peak, warmup, init_lr) / peak)
