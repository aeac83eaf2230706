"""One process's model, optimizer, schedule and gradient scaler, and one update with them.

An update runs teacher-forced forward/backward passes over the process's micro-batches of a
group (see :mod:`.batching`), accumulating gradients (DDP's ``no_sync`` until the last pass),
then unscales, clips and steps. The loss of each pass is divided by the target-token count of
the whole group (every rank's batches), and multiplied by the world size to undo DDP's
averaging, so the gradient is d(sum of token losses)/d(params) / group tokens whatever the
number of processes. With fp16, a step whose gradients overflowed is skipped by the gradient
scaler; it is not an update (see :meth:`Stepper.optimizer_step`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.utils import clip_grad_norm_

from mtkit.allocator import keep_freed_memory
from mtkit.checkpoint import Checkpoint, ResumeState
from mtkit.config import ModelConfig, TrainConfig
from mtkit.data.tokenizer import DEFAULT_SPECIAL_IDS, SpecialIds
from mtkit.errors import MtkitError
from mtkit.model.transformer import build_model
from mtkit.training import distributed as D
from mtkit.training.batching import Group
from mtkit.training.compiled import LossFn, loss_function, resolve_compile
from mtkit.training.optim import build_optimizer, build_scheduler
from mtkit.training.state import seed_everything


class Stepper:
    """Builds the model on this process's device (seeded; or with the weights ``init`` of
    another run, ``--init-from``), wraps it in DDP under torchrun. ``tag_ids``: the source
    vocabulary's target-language tags (:attr:`Transformer.tag_ids`)."""

    def __init__(
        self,
        cfg: TrainConfig,
        model_cfg: ModelConfig,
        ids: SpecialIds = DEFAULT_SPECIAL_IDS,
        init: dict[str, torch.Tensor] | None = None,
        tag_ids: tuple[int, ...] = (),
    ) -> None:
        self.cfg = cfg
        self.where = D.env_dist()
        self.device = D.resolve_device(cfg.device, self.where)
        if self.device.type == "cpu":
            keep_freed_memory()  # each update's large tensors: reused, not new pages
        self._use_precision(D.resolve_precision(cfg.precision, self.device))
        D.init_group(self.where, self.device)
        seed_everything(cfg.seed + self.where.rank)
        self.model = build_model(model_cfg, ids, tag_ids)
        if init is not None:
            self.model.load_state_dict(init)
        self.model = self.model.to(self.device)
        self.net = D.wrap_model(self.model, self.where, self.device)
        self.compiling = resolve_compile(cfg.compile, self.device)
        self.optimizer = build_optimizer(self.model, cfg)
        self.scheduler = build_scheduler(self.optimizer, cfg)

    def _use_precision(self, resolved: D.Precision) -> None:
        """Train in ``resolved``: its autocast dtype, and a gradient scaler enabled for fp16."""
        self.resolved, self.amp_dtype = resolved, resolved.dtype
        fp16 = self.amp_dtype == torch.float16
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=fp16)
        self._loss: LossFn | None = None  # built for this precision at the first pass

    @property
    def loss(self) -> LossFn:
        """The teacher-forced pass and its loss, compiled with ``--compile``."""
        if self._loss is None:
            pad = self.model.special_ids.pad
            eps, dtype = self.cfg.label_smoothing, self.amp_dtype
            # on CPU the loss projects the hidden states itself, in blocks of rows
            model = self.model if self.device.type == "cpu" else None
            self._loss = loss_function(
                self.net, eps, pad, self.device, dtype, model, self.compiling, not self.where.active
            )
        return self._loss

    def keep_precision(self, name: str) -> None:
        """A resumed ``auto`` run goes on in the precision it has trained in (``name``), so that
        it equals an uninterrupted run even where auto would choose otherwise now (a new
        ablation verdict in :mod:`mtkit.cpu`); auto's new choice stands only where this device
        cannot run the old one (fp16 off CUDA). Call before loading the scaler's state."""
        if self.cfg.precision != "auto" or name == self.resolved.name:
            return
        try:
            kept = D.resolve_precision(name, self.device)
        except MtkitError:
            return
        now = self.resolved.name
        why = f"auto: the run's precision so far, kept on resume; a new run would pick {now}"
        self._use_precision(kept._replace(reason=why))

    @property
    def precision(self) -> str:
        return str(self.amp_dtype).removeprefix("torch.") if self.amp_dtype else "fp32"

    @property
    def precision_note(self) -> str:
        """Which precision trains and why, e.g. 'bf16 (auto: avx512_bf16 present and ...)'."""
        return f"{self.resolved.name} ({self.resolved.reason})"

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def resume_state(self, rng: list[dict[str, Any]], state: dict[str, Any]) -> ResumeState:
        """The optimizer's, schedule's and scaler's states with the run's ``rng`` and ``state``."""
        return ResumeState(
            optimizer=self.optimizer.state_dict(),
            scheduler=self.scheduler.state_dict(),
            rng=rng,
            state=state,
            scaler=self.scaler.state_dict(),
        )

    def load(self, ckpt: Checkpoint, resume: ResumeState) -> None:
        """Continue from ``ckpt``'s weights and ``resume``'s optimizer, schedule and scaler."""
        self.model.load_state_dict(ckpt.model)
        self.optimizer.load_state_dict(resume.optimizer)
        self.scheduler.load_state_dict(resume.scheduler)
        if resume.scaler and self.scaler.is_enabled():
            self.scaler.load_state_dict(resume.scaler)

    def forward_backward(
        self, group: Group, flags: Callable[[], tuple[bool, ...]] = tuple
    ) -> list[float]:
        """Accumulate the group's gradients; returns [loss sum, nll sum, *flags()], summed over
        ranks. ``flags`` (stop requests) is asked after the backward passes and rides along in
        the same all-reduce."""
        self.optimizer.zero_grad(set_to_none=True)
        scale = self.where.world_size / group.ntokens
        totals = torch.zeros(2, device=self.device)
        last = len(group.batches) - 1
        for i, (batch, weight) in enumerate(zip(group.batches, group.weights, strict=True)):
            batch = batch.to(self.device)
            sync = i == last or not self.where.active
            with contextlib.nullcontext() if sync else self.net.no_sync():
                loss, nll = self.loss(batch.src, batch.tgt_in, batch.tgt_out)
                self.scaler.scale(loss * (weight * scale)).backward()
            if weight:
                totals[0] += loss.detach()
                totals[1] += nll.detach()
        totals = torch.cat([totals, torch.tensor(flags(), device=self.device, dtype=totals.dtype)])
        return D.all_reduce_sum(totals, self.where).tolist()

    def optimizer_step(self) -> tuple[float, bool]:
        """Unscale, clip, step the optimizer and the schedule; returns (gradient norm, stepped).

        With fp16 the scaler skips a step whose gradients overflowed (and halves its scale,
        which is how the skip shows); as in fairseq such a step is not an update, so the
        schedule does not step either."""
        self.scaler.unscale_(self.optimizer)
        max_norm = self.cfg.clip_norm if self.cfg.clip_norm > 0 else math.inf
        gnorm = clip_grad_norm_(self.model.parameters(), max_norm)
        scale = self.scaler.get_scale()  # 1.0 when disabled
        self.scaler.step(self.optimizer)
        self.scaler.update()
        stepped = self.scaler.get_scale() >= scale
        if stepped:
            self.scheduler.step()
        return float(gnorm), stepped

    def discard_gradients(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
