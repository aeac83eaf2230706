"""The training loop: teacher-forced updates over token batches, validation, checkpoints, resume.

One update consumes a group of ``world_size * update_freq`` batches (see :mod:`.batching`).
Gradients are summed over the group's micro-batches (DDP's ``no_sync`` until the last) and the
loss is normalised by the group's target-token count, so W processes with update_freq F compute
the same update as one process with update_freq W * F.

After each update, in order: stop conditions (max_updates, max_epochs, max_time, a signal),
then the update's checkpoint (``checkpoint_{update}.pt`` every ``save_every`` updates;
``checkpoint_last.pt`` alone before a validation or when training stops otherwise), then
validation (every ``validate_every`` updates, not after a signal), after which the update is
saved again with its validation in the history (and as ``checkpoint_best.pt`` when the metric
improved). Saving first means a validation that fails loses no finished update; the run then
resumes from that update and validates it before training on (a validation is due when the
update is on the schedule and the history lacks it).

Stopping and resuming is invisible in the run directory: numbered checkpoints and validations
follow their schedules only (a stop adds neither, so the history, checkpoint_best.pt, the
patience count and the window of ``mtkit average --last N`` are those of a run never stopped),
train records average their loss over ``log_every`` updates across a resume, and a checkpoint
carries every random state, so resuming from it continues exactly where the run left off.
"""

from __future__ import annotations

import functools
import math
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from mtkit.checkpoint import Checkpoint
from mtkit.config import ModelConfig, TrainConfig
from mtkit.data.binarized import ParallelData
from mtkit.data.sentence_style import source_records
from mtkit.data.tokenizer import Tokenizer
from mtkit.errors import MtkitError
from mtkit.languages import Languages
from mtkit.model.transformer import count_parameters
from mtkit.training import distributed as D
from mtkit.training.augment import Augmenter
from mtkit.training.batching import (
    Group,
    epoch_batches,
    iterate_groups,
    resolve_workers,
    sentence_sizes,
)
from mtkit.training.logs import Meter, RunLog, format_duration
from mtkit.training.signals import StopSignal
from mtkit.training.state import (
    LAST,
    CheckpointDir,
    TrainState,
    rng_state,
    seed_everything,
    set_rng_state,
)
from mtkit.training.step import Stepper
from mtkit.training.validate import validate


@dataclass
class TrainData:
    train: ParallelData
    valid: ParallelData | None  # None: no validation
    src_tokenizer: Tokenizer  # the tokenizers (with the source's tags) go into every checkpoint
    tgt_tokenizer: Tokenizer
    languages: Languages | None = None  # the dataset's (manifest.json), in every checkpoint too
    init: dict[str, Any] | None = None  # --init-from: the weights a new run starts from


@dataclass
class TrainResult:
    update: int
    epoch: int  # the epoch in progress (the next one when ``consumed`` is 0)
    consumed: int  # its batches trained on
    reason: str  # max_updates | max_epochs | max_time | early_stop | interrupted
    best: float | None
    last_valid: dict[str, Any] | None
    signum: int | None = None  # the signal that interrupted training


class Trainer:
    """One process of a run: the Stepper plus data order, state, validation and checkpoints."""

    def __init__(
        self, cfg: TrainConfig, model_cfg: ModelConfig, data: TrainData, quiet: bool = False
    ) -> None:
        self.cfg, self.model_cfg, self.data, self.quiet = cfg, model_cfg, data, quiet
        self.step = Stepper(
            cfg, model_cfg, data.tgt_tokenizer.specials, data.init, data.src_tokenizer.tag_ids
        )
        self.where, self.device = self.step.where, self.step.device
        self.workers = resolve_workers(cfg.num_workers, self.device)
        self.state = TrainState(precision=self.step.resolved.name)
        self.sizes = sentence_sizes(data.train.src_lengths, data.train.tgt_lengths)
        self.augmenter = None
        if cfg.augment.any():  # a pair's pieces must fit the positions and a batch
            longest = min(model_cfg.max_positions, cfg.max_tokens) - 1
            tokenizers = (data.src_tokenizer, data.tgt_tokenizer)
            self.augmenter = Augmenter(data.train, tokenizers, cfg.augment, cfg.seed, longest)
        self.ckpts = CheckpointDir(cfg.run_dir, cfg.keep_last)
        if self.where.is_main:
            self.ckpts.remove_temporaries()
        self.last_saved: int | None = None
        self.validated_at: int | None = None  # on every rank (only rank 0 keeps the history)
        self._rng: list[dict[str, Any]] | None = None

    # -- checkpoints ---------------------------------------------------------------------------

    def load(self, ckpt: Checkpoint) -> None:
        """Continue from a checkpoint of this run (random states are restored by ``run``)."""
        if ckpt.resume is None:
            raise MtkitError(f"{ckpt.where}: not a training checkpoint; cannot resume")
        self.state = TrainState.from_dict(ckpt.resume.state)
        if self.state.precision:  # checkpoints before it was recorded: auto's choice now
            self.step.keep_precision(self.state.precision)
        self.state.precision = self.step.resolved.name
        self.step.load(ckpt, ckpt.resume)
        self._rng = ckpt.resume.rng
        self.last_saved = self.state.update
        self.validated_at = self.state.history[-1]["update"] if self.state.history else None

    def checkpoint(self, rngs: list[dict[str, Any]]) -> Checkpoint:
        data, resume = self.data, self.step.resume_state(rngs, self.state.to_dict())
        return Checkpoint.of(
            self.step.model,
            data.src_tokenizer,
            data.tgt_tokenizer,
            languages=data.languages,
            train_config=asdict(self.cfg),
            resume=resume,
            source_pieces=data.train.longest_source(),
            **self.records,
        )

    @functools.cached_property
    def records(self) -> dict[str, Any]:
        """What checkpoints record of the training sources (read once, by the rank that
        saves, at its first save)."""
        style, words = source_records(self.data.train, self.data.src_tokenizer)
        return {"sentence_style": style, "source_words": words}

    def save(self, numbered: bool, best: bool) -> None:
        """checkpoint_last.pt (a numbered one too, or instead, see CheckpointDir.save).
        Collective: every rank's random state goes into rank 0's checkpoint."""
        rngs = D.gather_objects(rng_state(), self.where)
        if self.where.is_main:
            self.ckpts.save(self.checkpoint(rngs), self.state.update, numbered, best)
        self.last_saved = self.state.update
        D.barrier(self.where)

    def _restore_rng(self) -> None:
        if self._rng is None:
            return
        if len(self._rng) == self.where.world_size:
            set_rng_state(self._rng[self.where.rank])
        else:  # another number of processes: a fresh, still deterministic, stream
            seed_everything(self.cfg.seed + self.where.rank + 7919 * self.state.update)

    # -- the loop ------------------------------------------------------------------------------

    def _advance(self, group: Group, n_batches: int) -> None:
        self.state.consumed = group.consumed
        if group.consumed >= n_batches:
            self.state.epoch, self.state.consumed = self.state.epoch + 1, 0

    def _non_finite(self, loss: float) -> None:
        """Skip the batch (nan_policy skip) or stop with the resume point named."""
        self.step.discard_gradients()
        where = f"update {self.state.update + 1} (epoch {self.state.epoch})"
        if self.cfg.nan_policy == "skip":
            self.state.skipped += 1
            self.log.message(f"loss is {loss} at {where}: batch skipped ({self.state.skipped})")
            if self.state.skipped <= self.cfg.max_skipped_batches:
                return
            raise MtkitError(
                f"loss is {loss} at {where}: more than max_skipped_batches="
                f"{self.cfg.max_skipped_batches} non-finite batches; {self._resume_point()}"
            )
        raise MtkitError(
            f"loss is {loss} at {where}: training stopped; {self._resume_point()} "
            "(resume with --set nan_policy=skip to skip such batches, or start a new run with a "
            "lower lr or more warmup_updates)"
        )

    def _overflow(self) -> None:
        """The fp16 scaler skipped the step: not an update (counter and schedule stay)."""
        self.state.overflows += 1
        self.log.message(
            f"gradient overflow at update {self.state.update + 1} (epoch {self.state.epoch}): "
            f"step skipped ({self.state.overflows} so far), loss scale now "
            f"{self.step.scaler.get_scale():g}"
        )

    def _resume_point(self) -> str:
        if self.last_saved is None:
            return "no checkpoint was written yet"
        return f"{LAST} (update {self.last_saved}) is the last good state to resume from"

    def run(self) -> TrainResult:
        deterministic = torch.are_deterministic_algorithms_enabled()
        if self.device.type == "cpu":
            torch.use_deterministic_algorithms(True)  # bitwise-exact resume on CPU
        self.log = RunLog(
            self.cfg.run_dir,
            self.where.is_main,
            self.quiet,
            self.cfg.max_updates or None,
            self.state.update,
        )
        try:
            with StopSignal() as self.signal:
                return self._run()
        finally:
            self.log.close()
            torch.use_deterministic_algorithms(deterministic)

    def _run(self) -> TrainResult:
        if self.step.resolved.warning and self.where.is_main:  # even when quiet
            print(f"mtkit train: warning: {self.step.resolved.warning}", file=sys.stderr)
        self.log.message(f"precision: {self.step.precision_note}")
        compiling = self.step.compiling
        self.log.message(f"compiled step: {'on' if compiling.on else 'off'} ({compiling.reason})")
        self.log.message(f"data loading: {self.workers[0]} worker process(es) ({self.workers[1]})")
        self.log.message(
            f"model: {count_parameters(self.step.model):,} parameters on {self.device} "
            f"({self.step.precision}), "
            f"{self.where.world_size} process(es), {self.cfg.max_tokens} tokens x "
            f"{self.cfg.update_freq} per update and process"
        )
        self._restore_rng()
        self.t0, self.elapsed0 = time.monotonic(), self.state.elapsed
        self.updates0 = self.state.update
        self.meter, self.last_valid = Meter(), None
        spent = 0 < self.cfg.max_time <= self.state.elapsed  # the same on every rank
        reason = self._budget_reason(False, spent)
        if self._validation_due():  # the resumed update's validation did not finish
            reason = self._validate_and_save(reason, self._save_due())
        if reason is None and 0 < self.cfg.patience <= self.state.bad_validations:
            reason = "early_stop"  # an early-stopped run, resumed with the same patience
        while reason is None:
            train, sizes = self._epoch_data()
            batches = epoch_batches(
                sizes,
                self.cfg.max_tokens,
                self.cfg.seed,
                self.state.epoch,
                list(self.data.train.directions.values()),
                self.cfg.pair_temperature,
            )
            if not batches:
                raise MtkitError("the training split is empty")
            groups = iterate_groups(
                train,
                batches,
                self.state.consumed,
                self.where.rank,
                self.where.world_size,
                self.cfg.update_freq,
                self._loader_args(),
                self.step.model.special_ids,
            )
            for group in groups:
                reason = self._update(group, len(batches))
                if reason is not None:
                    break
        state = self.state
        return TrainResult(
            state.update,
            state.epoch,
            state.consumed,
            reason,
            state.best,
            self.last_valid,
            self.signal.signum,
        )

    def _epoch_data(self) -> tuple[Any, torch.Tensor]:
        """The training split as this epoch sees it (augmented, when asked) and its sizes."""
        if self.augmenter is None:
            return self.data.train, self.sizes
        started = time.monotonic()
        train = self.augmenter.epoch(self.state.epoch)
        self.log.message(
            f"augment: epoch {self.state.epoch}: {len(train.replaced):,} of {len(train):,} "
            f"pairs changed ({time.monotonic() - started:.1f} s)"
        )
        return train, sentence_sizes(train.src_lengths, train.tgt_lengths)

    def _loader_args(self) -> dict[str, Any]:
        return {
            "num_workers": self.workers[0],
            "pin_memory": self.device.type == "cuda",
            # its own generator: creating a loader must not draw from the global torch RNG
            "generator": torch.Generator().manual_seed(self.cfg.seed),
        }

    def _update(self, group: Group, n_batches: int) -> str | None:
        """One update and what follows it; returns why training stops, or None."""

        def stop_requests() -> tuple[bool, bool]:
            return self.signal.signum is not None, self._time_up()

        loss, nll, by_signal, by_time = self.step.forward_backward(group, stop_requests)
        if not math.isfinite(loss):
            self._non_finite(loss)
            self._advance(group, n_batches)
            return None
        lr = self.step.lr
        gnorm, stepped = self.step.optimizer_step()
        if not stepped:
            self._overflow()
            self._advance(group, n_batches)
            return None
        self.state.update += 1
        self._advance(group, n_batches)
        self.state.elapsed = self.elapsed0 + time.monotonic() - self.t0
        self.meter.add(group.ntokens)
        self.state.log_loss += loss
        self.state.log_nll += nll
        self.state.log_tokens += group.ntokens
        self._report(loss / group.ntokens, lr, gnorm, n_batches)
        reason = self._budget_reason(by_signal > 0, by_time > 0)
        return self._boundary(reason)

    def _time_up(self) -> bool:
        elapsed = self.elapsed0 + time.monotonic() - self.t0
        return self.cfg.max_time > 0 and elapsed >= self.cfg.max_time

    def _budget_reason(self, by_signal: bool, by_time: bool) -> str | None:
        cfg, state = self.cfg, self.state
        if by_signal:
            return "interrupted"
        if cfg.max_updates and state.update >= cfg.max_updates:
            return "max_updates"
        if cfg.max_epochs and state.epoch > cfg.max_epochs:
            return "max_epochs"
        if by_time:  # decided in the all-reduce: ranks' clocks differ
            return "max_time"
        return None

    def _boundary(self, reason: str | None) -> str | None:
        """Save, then validate, as due; validation may stop training early."""
        started = time.monotonic()
        numbered = self._save_due()
        validate = reason != "interrupted" and self._validation_due()
        if numbered or validate or reason is not None:
            self.save(numbered, best=False)  # before validating: a failure loses no update
        if validate:
            reason = self._validate_and_save(reason, numbered)
        self.meter.paused += time.monotonic() - started
        return reason

    def _save_due(self) -> bool:
        every = self.cfg.save_every
        return every > 0 and self.state.update % every == 0

    def _validation_due(self) -> bool:
        """On the schedule and not validated yet."""
        every = self.cfg.validate_every
        if self.data.valid is None or every <= 0 or self.state.update == 0:
            return False
        return self.state.update % every == 0 and self.validated_at != self.state.update

    def _validate_and_save(self, reason: str | None, numbered: bool) -> str | None:
        """Validate the update, then save it again with its validation (as best if better)."""
        improved, early = self._validate()
        self.save(numbered, improved)
        return "early_stop" if early and reason is None else reason

    def _validate(self) -> tuple[bool, bool]:
        """Rank 0 validates; returns (improved, stop early) on every rank."""
        improved = early = False
        if self.where.is_main:
            assert self.data.valid is not None
            record = validate(
                self.step.model,
                self.data.valid,
                self.cfg,
                self.device,
                self.step.amp_dtype,
                self.data.tgt_tokenizer,
            )
            improved, early = self._track(record)
        D.barrier(self.where)
        self.validated_at = self.state.update
        improved = D.broadcast_flag(improved, self.where, self.device)
        return improved, D.broadcast_flag(early, self.where, self.device)

    def _track(self, record: dict[str, Any]) -> tuple[bool, bool]:
        """Log a validation record, update best/patience; returns (improved, stop early)."""
        state = self.state
        record = {
            "update": state.update,
            "epoch": state.epoch,
            **record,
            "elapsed": round(state.elapsed, 3),
        }
        state.history.append(record)
        self.last_valid = record
        self.log.record("valid", record)
        by_bleu = self.cfg.validate_bleu
        metric = record["valid_bleu"] if by_bleu else record["valid_loss"]
        improved = state.best is None or (metric > state.best if by_bleu else metric < state.best)
        if improved:
            state.best, state.bad_validations = metric, 0
        else:
            state.bad_validations += 1
        return improved, 0 < self.cfg.patience <= state.bad_validations

    def _report(self, loss: float, lr: float, gnorm: float, n_batches: int) -> None:
        state, meter = self.state, self.meter
        tps = meter.tokens_per_s()
        eta = self._eta(n_batches)
        postfix = {"loss": f"{loss:.3f}", "lr": f"{lr:.2e}", "tok/s": f"{tps:.0f}"}
        if eta is not None:
            postfix["eta"] = format_duration(eta)
        self.log.progress(postfix)
        if state.update % max(self.cfg.log_every, 1):
            return
        nll = state.log_nll / max(state.log_tokens, 1)
        self.log.record(
            "train",
            {
                "update": state.update,
                "epoch": state.epoch,
                "loss": state.log_loss / max(state.log_tokens, 1),
                "nll": nll,
                "ppl": math.exp(min(nll, 700.0)),
                "lr": lr,
                "gnorm": gnorm,
                "tgt_tokens_per_s": round(tps, 1),
                "elapsed": round(state.elapsed, 3),
                **self._scaler_record(),
            },
        )
        meter.reset()
        state.log_loss = state.log_nll = 0.0
        state.log_tokens = 0

    def _scaler_record(self) -> dict[str, float]:
        """fp16: the loss scale and the steps skipped so far, for the train record."""
        if not self.step.scaler.is_enabled():
            return {}
        return {"loss_scale": self.step.scaler.get_scale(), "overflows": self.state.overflows}

    def _eta(self, n_batches: int) -> float | None:
        """Seconds left under the tightest known budget, from this session's update rate."""
        cfg, state = self.cfg, self.state
        done = state.update - self.updates0
        if done <= 0:
            return None
        per_update = (time.monotonic() - self.t0) / done
        left = []
        if cfg.max_updates:
            left.append((cfg.max_updates - state.update) * per_update)
        if cfg.max_epochs:
            batches = (cfg.max_epochs - state.epoch + 1) * n_batches - state.consumed
            left.append(batches / (self.where.world_size * cfg.update_freq) * per_update)
        if cfg.max_time > 0:
            left.append(cfg.max_time - state.elapsed)
        return max(min(left), 0.0) if left else None


def train(
    cfg: TrainConfig,
    model_cfg: ModelConfig,
    data: TrainData,
    resume: Checkpoint | None = None,
    quiet: bool = False,
) -> TrainResult:
    """Train (or continue ``resume``, a checkpoint of this run) until a stop condition."""
    where = D.env_dist()
    trainer = Trainer(cfg, model_cfg, data, quiet)
    try:
        if resume is not None:
            trainer.load(resume)
        return trainer.run()
    finally:
        del trainer  # its DDP model before the process group: see D.close_group
        D.close_group(where)
