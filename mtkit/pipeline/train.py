"""`mtkit train` and `mtkit average`: configuration, run directory, dataset and model wiring.

The configuration of a run is, lowest priority first: TrainConfig's defaults (or, when the run
directory holds ``checkpoint_last.pt``, the config saved in it), the YAML file (TrainConfig
fields at the top level plus an optional ``model:`` mapping of ModelConfig fields), then the
command line (explicit flags and ``--set key=value`` / ``--set model.key=value``). The model is
the preset's dimensions, the data's vocabularies, ``share_all_embeddings`` when the dataset has
a joint vocabulary, then the ``model`` overrides.

Running `mtkit train` again on a run directory continues from ``checkpoint_last.pt``. Only the
fields in ``CHANGEABLE_ON_RESUME`` may differ from the saved config; anything else is refused.

``init_from`` (``--init-from CKPT``, fine-tuning) starts a new run from another checkpoint's
architecture and weights, with a fresh optimizer and schedule. The data should be encoded with
that checkpoint's tokenizers (``mtkit prepare --tokenizer-from CKPT``): other sentencepiece
models or vocabularies of the same sizes are trained on with a warning (the ids then mean other
pieces than the weights learnt), other sizes are refused. Only the dropout fields of the model
may be set; the rest is the checkpoint's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import typing
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from mtkit.config import ModelConfig, TrainConfig, apply_overrides, from_dict, load_yaml
from mtkit.errors import MtkitError
from mtkit.pipeline.textio import atomic_write_text

CONFIG_FILE = "config.yaml"
# budget, bookkeeping and execution fields: they do not change what one update computes
CHANGEABLE_ON_RESUME = frozenset({
    "max_updates", "max_epochs", "max_time", "validate_every", "save_every", "keep_last",
    "patience", "log_every", "device", "precision", "num_workers", "valid_beam",
    "valid_max_sentences", "nan_policy", "max_skipped_batches", "run_dir",
})  # fmt: skip
FROM_DATA = ("src_vocab_size", "tgt_vocab_size")
VOCAB_FIELDS = ("vocab", "special_ids")  # checkpoint fields of an imported vocabulary


@dataclasses.dataclass
class Settings:
    """What the user set explicitly, before defaults or a saved config fill in the rest."""

    yaml_path: str | None
    yaml_train: dict[str, Any]
    yaml_model: dict[str, Any]
    cli_train: dict[str, Any]
    cli_model: dict[str, Any]

    @property
    def run_dir(self) -> str:
        return str(self.cli_train.get("run_dir") or self.yaml_train.get("run_dir") or
                   TrainConfig.run_dir)  # fmt: skip

    def model_keys(self) -> set[str]:
        return set(self.yaml_model) | set(self.cli_model)


INIT_CHANGEABLE = frozenset({"dropout", "attention_dropout", "activation_dropout"})


def read_settings(
    config_path: str | None, options: dict[str, Any], sets: typing.Sequence[str]
) -> Settings:
    """Split YAML and command-line settings into train and model parts."""
    yaml_train: dict[str, Any] = load_yaml(config_path) if config_path else {}
    yaml_model = yaml_train.pop("model", None) or {}
    if not isinstance(yaml_model, dict):
        raise MtkitError(f"{config_path}: 'model' must be a mapping of model options")
    cli_train, cli_model = dict(options), {}
    for item in sets:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise MtkitError(f"--set {item!r}: expected KEY=VALUE or model.KEY=VALUE")
        if key.startswith("model."):
            cli_model[key[len("model.") :]] = value
        else:
            cli_train[key] = value
    for key in FROM_DATA:
        if key in yaml_model or key in cli_model:
            raise MtkitError(f"model.{key} comes from the dataset's sentencepiece model")
    return Settings(config_path, yaml_train, yaml_model, cli_train, cli_model)


def _layer(config: Any, values: dict[str, Any], where: str) -> Any:
    return apply_overrides(config, values, where=where)


def train_config(settings: Settings, base: TrainConfig) -> TrainConfig:
    cfg = _layer(base, settings.yaml_train, settings.yaml_path or "config")
    return _layer(cfg, settings.cli_train, "command line")


def check_train_config(cfg: TrainConfig) -> None:
    """Refuse values no run can use, naming the option."""
    if not cfg.data:
        raise MtkitError("no dataset: give --data DIR (a directory written by `mtkit prepare`)")
    rules = [
        ("max_tokens", cfg.max_tokens > 0, "> 0"), ("update_freq", cfg.update_freq >= 1, ">= 1"),
        ("lr", cfg.lr > 0, "> 0"), ("warmup_updates", cfg.warmup_updates >= 0, ">= 0"),
        ("warmup_init_lr", cfg.warmup_init_lr >= 0, ">= 0"), ("adam_eps", cfg.adam_eps > 0, "> 0"),
        ("adam_betas", len(cfg.adam_betas) == 2 and all(0 <= b < 1 for b in cfg.adam_betas),
         "two values in [0, 1)"),
        ("weight_decay", cfg.weight_decay >= 0, ">= 0"), ("clip_norm", cfg.clip_norm >= 0, ">= 0"),
        ("label_smoothing", 0 <= cfg.label_smoothing < 1, "in [0, 1)"),
        ("max_updates", cfg.max_updates >= 0, ">= 0"), ("max_epochs", cfg.max_epochs >= 0, ">= 0"),
        ("max_time", cfg.max_time >= 0, ">= 0"),
        ("validate_every", cfg.validate_every >= 0, ">= 0"),
        ("valid_beam", cfg.valid_beam >= 1, ">= 1"),
        ("valid_max_sentences", cfg.valid_max_sentences >= 0, ">= 0"),
        ("save_every", cfg.save_every >= 0, ">= 0"), ("keep_last", cfg.keep_last >= 0, ">= 0"),
        ("patience", cfg.patience >= 0, ">= 0"), ("log_every", cfg.log_every >= 1, ">= 1"),
        ("num_workers", cfg.num_workers >= 0, ">= 0"),
        ("nan_policy", cfg.nan_policy in ("stop", "skip"), "stop or skip"),
        ("max_skipped_batches", cfg.max_skipped_batches >= 0, ">= 0"),
        ("pair_temperature", cfg.pair_temperature > 0, "> 0"),
    ]  # fmt: skip
    for name, ok, expected in rules:
        if not ok:
            raise MtkitError(f"{name} must be {expected}, got {getattr(cfg, name)!r}")


def model_config(
    settings: Settings, cfg: TrainConfig, vocab: tuple[int, int], joint: bool
) -> ModelConfig:
    """Preset, vocabularies, shared embeddings for a joint vocabulary, then overrides."""
    from mtkit.model.builders import check_model_config
    from mtkit.model.transformer import resolve_model_config

    auto: dict[str, Any] = {}
    if joint and vocab[0] == vocab[1] and "share_all_embeddings" not in settings.model_keys():
        auto["share_all_embeddings"] = True
    yaml_model = settings.yaml_model
    _layer(ModelConfig(), yaml_model, f"{settings.yaml_path}: model")  # names the file on errors
    model = resolve_model_config(cfg.preset, *vocab, {**auto, **yaml_model})
    model = _layer(model, settings.cli_model, "--set model.*")
    check_model_config(model)
    return model


def resume_configs(
    settings: Settings, ckpt: dict[str, Any], where: str
) -> tuple[TrainConfig, ModelConfig]:
    """The saved configs with the user's settings applied; refuse changes that matter."""
    saved = from_dict(TrainConfig, ckpt["train_config"], where=f"{where}: train_config")
    saved_model = from_dict(ModelConfig, ckpt["model_config"], where=f"{where}: model_config")
    cfg = train_config(settings, saved)
    if Path(cfg.data).resolve() == Path(saved.data).resolve():
        cfg = dataclasses.replace(cfg, data=saved.data)
    model = _layer(saved_model, settings.yaml_model, f"{settings.yaml_path}: model")
    model = _layer(model, settings.cli_model, "--set model.*")
    changes = [f"{k} {v!r} -> {asdict(cfg)[k]!r}" for k, v in asdict(saved).items()
               if k not in CHANGEABLE_ON_RESUME and asdict(cfg)[k] != v]  # fmt: skip
    changes += [f"model.{k} {v!r} -> {asdict(model)[k]!r}"
                for k, v in asdict(saved_model).items() if asdict(model)[k] != v]  # fmt: skip
    if changes:
        raise MtkitError(
            f"{cfg.run_dir} was trained with another config ({'; '.join(changes)}): only "
            f"{', '.join(sorted(CHANGEABLE_ON_RESUME - {'run_dir'}))} may change when resuming; "
            "use a new --run-dir to start over"
        )
    return cfg, model


def _is_main() -> bool:
    """Rank 0 of a torchrun job, or a process outside torchrun: the one that writes the run
    directory and prints."""
    return int(os.environ.get("RANK", "0")) == 0


def save_run_config(cfg: TrainConfig, model: ModelConfig) -> None:
    text = yaml.safe_dump({**asdict(cfg), "model": asdict(model)}, sort_keys=False)
    atomic_write_text(Path(cfg.run_dir) / CONFIG_FILE, text)


def note(text: str, quiet: bool) -> None:
    if not quiet and _is_main():
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


def _open_data(cfg: TrainConfig) -> tuple[Any, Any, Any, Any, bool]:
    """(train split, valid split or None, source tokenizer, target tokenizer, joint)."""
    from mtkit.data.binarized import ParallelData, load_tokenizers, read_manifest

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
    return train, valid, src_tok, tgt_tok, bool(manifest.get("joint", False))


def _resume_checkpoint(run_dir: Path) -> dict[str, Any] | None:
    from mtkit.checkpoint import load_checkpoint
    from mtkit.training.state import LAST

    path = run_dir / LAST
    if not path.is_file():
        return None
    ckpt = load_checkpoint(path)
    for key in ("train_config", "optimizer", "scheduler", "rng", "state"):
        if key not in ckpt:
            raise MtkitError(f"{path}: not a training checkpoint (no '{key}'); cannot resume")
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
    if _is_main():
        run_dir.mkdir(parents=True, exist_ok=True)
    with run_dir_lock(run_dir) if _is_main() else contextlib.nullcontext():
        try:
            return _train_locked(settings, quiet)
        except BaseException:
            _remove_unstarted(run_dir, made)
            raise


def _train_locked(settings: Settings, quiet: bool) -> tuple[str, int]:
    """run_training once the run directory exists and is this process's."""
    from mtkit.training.logs import truncate_metrics
    from mtkit.training.loop import TrainData, train

    ckpt = _resume_checkpoint(Path(settings.run_dir))
    if ckpt is not None:
        cfg, model = resume_configs(settings, ckpt, f"{settings.run_dir}/checkpoint_last.pt")
    else:
        cfg = train_config(settings, TrainConfig())
    check_train_config(cfg)
    train_split, valid, src_tok, tgt_tok, joint = _open_data(cfg)
    spm = {"src": src_tok.proto, "tgt": tgt_tok.proto}
    vocab = _vocab_fields(src_tok, tgt_tok)
    init = None
    if ckpt is None and cfg.init_from:
        model, init = init_model(settings, cfg, src_tok, tgt_tok)
    elif ckpt is None:
        model = model_config(settings, cfg, (len(src_tok), len(tgt_tok)), joint)
    elif ckpt["spm"] != spm or {k: ckpt[k] for k in VOCAB_FIELDS if k in ckpt} != vocab:
        raise MtkitError(f"{cfg.data}: its sentencepiece models differ from those {cfg.run_dir} "
                         "was trained with")  # fmt: skip
    run_dir = Path(cfg.run_dir)
    if _is_main():
        save_run_config(cfg, model)
        history = ckpt["state"]["history"] if ckpt else []
        truncate_metrics(run_dir, ckpt["update"] if ckpt else 0,
                         history[-1]["update"] if history else 0)  # fmt: skip
    start = f"resuming from update {ckpt['update']}" if ckpt else "starting"
    note(f"mtkit train: {start} in {run_dir}; data {cfg.data} ({len(train_split)} pairs); "
         f"model {cfg.preset} d={model.d_model} layers={model.encoder_layers}+"
         f"{model.decoder_layers}; config in {run_dir / CONFIG_FILE}", quiet)  # fmt: skip
    warn_long_valid_pairs(valid, cfg, model)
    data = TrainData(train_split, valid, tgt_tok, spm, vocab, init, src_tok.tag_ids)
    return describe(train(cfg, model, data, ckpt, quiet), cfg)


@contextlib.contextmanager
def run_dir_lock(run_dir: Path) -> typing.Iterator[None]:
    """An exclusive lock on the run directory (``flock`` on the directory itself: no file is
    added, and the kernel drops it when the process dies, ``kill -9`` included) while this
    process trains into it; a second `mtkit train` on the same directory is refused."""
    try:
        import fcntl
    except ImportError:  # no flock on this platform: no lock
        yield
        return
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            busy = "another mtkit train is writing this run directory (--run-dir)"
            raise MtkitError(f"{run_dir}: {busy}; wait for it to stop or use another") from None
        yield
    finally:
        os.close(fd)


def _vocab_fields(src: Any, tgt: Any) -> dict[str, Any]:
    """The checkpoint fields of an imported vocabulary (mtkit.checkpoint.vocab_fields)."""
    from mtkit.checkpoint import vocab_fields

    return vocab_fields(src, tgt)


def init_model(
    settings: Settings, cfg: TrainConfig, src: Any, tgt: Any
) -> tuple[ModelConfig, dict[str, Any]]:
    """``--init-from``: the checkpoint's model config (dropouts may change) and weights, checked
    against the data's vocabularies: other sizes are refused, other pieces warned about."""
    from mtkit.checkpoint import load_checkpoint, tokenizers

    where = cfg.init_from
    ckpt = load_checkpoint(where)
    saved = from_dict(ModelConfig, ckpt["model_config"], where=f"{where}: model_config")
    fixed = sorted(settings.model_keys() - INIT_CHANGEABLE)
    if fixed:
        raise MtkitError(f"--init-from {where}: the model is the checkpoint's; model.{fixed[0]} "
                         f"cannot be set (only {', '.join(sorted(INIT_CHANGEABLE))})")  # fmt: skip
    model = _layer(saved, settings.yaml_model, f"{settings.yaml_path}: model")
    model = _layer(model, settings.cli_model, "--set model.*")
    theirs = tokenizers(ckpt, where)
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
    return model, ckpt["model"]


def _remove_unstarted(run_dir: Path, made: list[Path]) -> None:
    """A run that failed before its first checkpoint leaves no directory this call created."""
    if not made or not _is_main() or any(run_dir.glob("checkpoint*.pt")):
        return
    shutil.rmtree(run_dir, ignore_errors=True)
    for parent in made[1:]:
        with contextlib.suppress(OSError):
            parent.rmdir()


def describe(result: Any, cfg: TrainConfig) -> tuple[str, int]:
    """A one-line summary of a finished (or interrupted) run and the exit code."""
    if not _is_main():
        return "", 128 + result.signum if result.signum else 0
    if result.consumed == 0 and result.epoch > 1:
        where = f"update {result.update} (end of epoch {result.epoch - 1})"
    else:
        where = f"update {result.update} (epoch {result.epoch})"
    if result.reason == "interrupted":
        import signal

        name = signal.Signals(result.signum).name if result.signum else "a signal"
        return (f"interrupted by {name} at {where}: wrote {cfg.run_dir}/checkpoint_last.pt; "
                "run the same command to resume", 128 + (result.signum or 2))  # fmt: skip
    text = f"stopped at {where}: {result.reason}"
    if result.best is not None:
        metric = "BLEU" if cfg.validate_bleu else "loss"
        text += f"; best valid {metric} {result.best:.4g} in {cfg.run_dir}/checkpoint_best.pt"
    if result.last_valid and result.last_valid.get("bleu_signature"):
        text += f" ({result.last_valid['bleu_signature']})"
    return text, 0


def run_average(
    run_dir: str | None, last: int | None, checkpoints: typing.Sequence[str], output: str
) -> str:
    """`mtkit average`: the last N checkpoints of a run, or the given files, into ``output``."""
    from mtkit.training.average import average_checkpoints
    from mtkit.training.state import numbered_checkpoints

    if bool(checkpoints) == (run_dir is not None or last is not None):
        raise MtkitError("give either --last N RUN_DIR or one or more -c CHECKPOINT")
    if checkpoints:
        paths = [Path(p) for p in checkpoints]
    else:
        if run_dir is None or last is None or last < 1:
            raise MtkitError("--last N RUN_DIR: give N >= 1 and the run directory")
        if not Path(run_dir).is_dir():
            raise MtkitError(f"{run_dir}: no such run directory")
        paths = numbered_checkpoints(run_dir)[-last:]
        if len(paths) < last:
            raise MtkitError(f"{run_dir}: {len(paths)} numbered checkpoints, fewer than {last}")
    average_checkpoints(paths, output)
    return f"averaged {len(paths)} checkpoints ({', '.join(p.name for p in paths)}) into {output}"
