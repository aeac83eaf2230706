"""`mtkit train`: the run's configuration (:mod:`.train_config`), its directory
(:mod:`.rundir`), the dataset and the model, wired into :func:`mtkit.training.loop.train`.

Running `mtkit train` again on a run directory continues from ``checkpoint_last.pt``.
``init_from`` (``--init-from CKPT``, fine-tuning) starts a new run from another checkpoint's
architecture and weights, with a fresh optimizer and schedule. The data should be encoded with
that checkpoint's tokenizers (``mtkit prepare --tokenizer-from CKPT``): other sentencepiece
models or vocabularies of the same sizes are trained on with a warning (the ids then mean other
pieces than the weights learnt), other sizes are refused. Only the dropout fields of the model
may be set; the rest is the checkpoint's.

Every checkpoint of the run names the dataset's languages (``src_lang``/``tgt_lang`` of its
``manifest.json``) and the source vocabulary's target-language tags.
"""

from __future__ import annotations

import contextlib
import sys
import typing
from pathlib import Path
from typing import Any

from mtkit.config import ModelConfig, TrainConfig
from mtkit.errors import MtkitError
from mtkit.pipeline.rundir import is_main, remove_unstarted, run_dir_lock
from mtkit.pipeline.train_config import (
    CONFIG_FILE,
    Settings,
    check_train_config,
    init_model_config,
    model_config,
    read_settings,
    resume_configs,
    save_run_config,
    train_config,
)

if typing.TYPE_CHECKING:
    from mtkit.checkpoint import Checkpoint
    from mtkit.languages import Languages


def note(text: str, quiet: bool) -> None:
    if not quiet and is_main():
        print(text, file=sys.stderr, flush=True)


def warn_long_valid_pairs(valid: Any, cfg: TrainConfig, model: ModelConfig) -> None:
    """One line (even when quiet) on what validation does with pairs longer than the model's
    positions or max_tokens (see mtkit.training.validate)."""
    from mtkit.training.validate import describe_plan, plan_validation

    if valid is None:
        return
    plan = plan_validation(valid, model.max_positions, cfg.max_tokens)
    line = describe_plan(plan, model.max_positions, cfg.max_tokens)
    if line:
        note(f"mtkit train: warning: {line}", quiet=False)


def _open_data(cfg: TrainConfig) -> tuple[Any, Any, Any, Any, bool, Languages | None]:
    """(train split, valid split or None, source tokenizer, target tokenizer, joint, the
    dataset's languages)."""
    from mtkit.data.binarized import ParallelData, load_tokenizers, read_manifest
    from mtkit.languages import Languages

    manifest = read_manifest(cfg.data)
    src_tok, tgt_tok = load_tokenizers(cfg.data)
    train = ParallelData(cfg.data, "train")
    if len(train) == 0:
        raise MtkitError(f"{cfg.data}: the train split is empty")
    valid = None
    if cfg.validate_every > 0 and "valid" in manifest.get("splits", {}):
        valid = ParallelData(cfg.data, "valid")
        text = Path(cfg.data) / "valid.tgt.txt"
        if cfg.validate_bleu and not text.is_file():
            raise MtkitError(f"{text}: missing, BLEU needs the references (or validate_bleu false)")
        valid = valid if len(valid) else None
    joint = bool(manifest.get("joint", False))
    return train, valid, src_tok, tgt_tok, joint, Languages.from_dict(manifest)


def _resume_checkpoint(run_dir: Path) -> Checkpoint | None:
    from mtkit.checkpoint import Checkpoint
    from mtkit.training.state import LAST

    path = run_dir / LAST
    if not path.is_file():
        return None
    ckpt = Checkpoint.load(path)
    if ckpt.resume is None or not ckpt.train_config:
        raise MtkitError(f"{path}: not a training checkpoint (no training state); cannot resume")
    return ckpt


def run_training(
    config_path: str | None,
    options: dict[str, Any],
    sets: typing.Sequence[str] = (),
    quiet: bool = False,
) -> tuple[str, int]:
    """Train or resume a run; returns (summary line, exit code: 0, or 128 + signal number)."""
    settings = read_settings(config_path, options, sets)
    run_dir = Path(settings.run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise MtkitError(f"{run_dir}: not a directory (--run-dir)")
    made = [p for p in (run_dir, *run_dir.parents) if not p.exists()]
    if is_main():
        run_dir.mkdir(parents=True, exist_ok=True)
    with run_dir_lock(run_dir) if is_main() else contextlib.nullcontext():
        try:
            return _train_locked(settings, quiet)
        except BaseException:
            remove_unstarted(run_dir, made)
            raise


def _train_locked(settings: Settings, quiet: bool) -> tuple[str, int]:
    """run_training once the run directory exists and is this process's."""
    from mtkit.training.logs import truncate_metrics
    from mtkit.training.loop import TrainData, train

    ckpt = _resume_checkpoint(Path(settings.run_dir))
    if ckpt is not None:
        cfg, model = resume_configs(settings, ckpt)
    else:
        cfg = train_config(settings, TrainConfig())
    check_train_config(cfg)
    train_split, valid, src_tok, tgt_tok, joint, languages = _open_data(cfg)
    init = None
    if ckpt is None and cfg.init_from:
        model, init = init_model(settings, cfg, src_tok, tgt_tok)
    elif ckpt is None:
        model = model_config(settings, cfg, (len(src_tok), len(tgt_tok)), joint)
    elif not ckpt.has_vocabularies(src_tok, tgt_tok):
        raise MtkitError(
            f"{cfg.data}: its sentencepiece models differ from those {cfg.run_dir} was trained with"
        )
    run_dir = Path(cfg.run_dir)
    resume = ckpt.resume if ckpt else None
    if is_main():
        save_run_config(cfg, model)
        history = resume.state["history"] if resume else []
        truncate_metrics(
            run_dir, resume.update if resume else 0, history[-1]["update"] if history else 0
        )
    start = f"resuming from update {resume.update}" if resume else "starting"
    note(
        f"mtkit train: {start} in {run_dir}; data {cfg.data} ({len(train_split)} pairs); "
        f"model {cfg.preset} d={model.d_model} layers={model.encoder_layers}+"
        f"{model.decoder_layers}; config in {run_dir / CONFIG_FILE}",
        quiet,
    )
    warn_long_valid_pairs(valid, cfg, model)
    data = TrainData(train_split, valid, src_tok, tgt_tok, languages, init)
    return describe(train(cfg, model, data, ckpt, quiet), cfg)


def init_model(
    settings: Settings, cfg: TrainConfig, src: Any, tgt: Any
) -> tuple[ModelConfig, dict[str, Any]]:
    """``--init-from``: the checkpoint's model config (dropouts may change) and weights, checked
    against the data's vocabularies: other sizes are refused, other pieces warned about."""
    from mtkit.checkpoint import Checkpoint

    where = cfg.init_from
    ckpt = Checkpoint.load(where)
    model = init_model_config(settings, ckpt)
    theirs = ckpt.tokenizers()
    for side, ours, other in (("source", src, theirs[0]), ("target", tgt, theirs[1])):
        if len(ours) != len(other):
            raise MtkitError(
                f"{cfg.data}: {side} vocabulary of {len(ours)} pieces, {where} has "
                f"{len(other)}: prepare the data with --tokenizer-from {where}"
            )
        if ours.sha256 != other.sha256:
            note(
                f"mtkit train: warning: {cfg.data}: its {side} vocabulary differs from "
                f"{where}'s (same size, so its ids train {where}'s embeddings for other "
                f"pieces); prepare the data with --tokenizer-from {where}",
                quiet=False,
            )
    return model, ckpt.model


def describe(result: Any, cfg: TrainConfig) -> tuple[str, int]:
    """A one-line summary of a finished (or interrupted) run and the exit code."""
    if not is_main():
        return "", 128 + result.signum if result.signum else 0
    if result.consumed == 0 and result.epoch > 1:
        where = f"update {result.update} (end of epoch {result.epoch - 1})"
    else:
        where = f"update {result.update} (epoch {result.epoch})"
    if result.reason == "interrupted":
        import signal

        name = signal.Signals(result.signum).name if result.signum else "a signal"
        return (
            f"interrupted by {name} at {where}: wrote {cfg.run_dir}/checkpoint_last.pt; "
            "run the same command to resume",
            128 + (result.signum or 2),
        )
    text = f"stopped at {where}: {result.reason}"
    if result.best is not None:
        metric = "BLEU" if cfg.validate_bleu else "loss"
        text += f"; best valid {metric} {result.best:.4g} in {cfg.run_dir}/checkpoint_best.pt"
    if result.last_valid and result.last_valid.get("bleu_signature"):
        text += f" ({result.last_valid['bleu_signature']})"
    return text, 0
