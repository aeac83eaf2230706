"""The configuration of a `mtkit train` run, layered from defaults, a saved run, YAML and flags.

Lowest priority first: TrainConfig's defaults (or, when the run directory holds
``checkpoint_last.pt``, the config saved in it), the YAML file (TrainConfig fields at the top
level plus an optional ``model:`` mapping of ModelConfig fields), then the command line
(explicit flags and ``--set key=value`` / ``--set model.key=value``). The model is the preset's
dimensions, the data's vocabularies, ``share_all_embeddings`` when the dataset has a joint
vocabulary, then the ``model`` overrides.

Running `mtkit train` again on a run directory continues from ``checkpoint_last.pt``. Only the
fields in ``CHANGEABLE_ON_RESUME`` may differ from the saved config; anything else is refused.
With ``--init-from`` only the dropout fields of the model (``INIT_CHANGEABLE``) may be set.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from mtkit.config import COMPILE_MODES, ModelConfig, TrainConfig, apply_overrides, load_yaml
from mtkit.errors import MtkitError
from mtkit.pipeline.textio import atomic_write_text

if typing.TYPE_CHECKING:
    from mtkit.checkpoint import Checkpoint

CONFIG_FILE = "config.yaml"
# budget, bookkeeping and execution fields: they do not change what one update computes
CHANGEABLE_ON_RESUME = frozenset(
    {
        "max_updates",
        "max_epochs",
        "max_time",
        "validate_every",
        "save_every",
        "keep_last",
        "patience",
        "log_every",
        "device",
        "precision",
        "compile",
        "num_workers",
        "valid_beam",
        "valid_max_sentences",
        "nan_policy",
        "max_skipped_batches",
        "run_dir",
    }
)
FROM_DATA = ("src_vocab_size", "tgt_vocab_size")
INIT_CHANGEABLE = frozenset({"dropout", "attention_dropout", "activation_dropout"})


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
        return str(
            self.cli_train.get("run_dir") or self.yaml_train.get("run_dir") or TrainConfig.run_dir
        )

    def model_keys(self) -> set[str]:
        return set(self.yaml_model) | set(self.cli_model)

    def model_over(self, model: ModelConfig) -> ModelConfig:
        """``model`` with the YAML's, then the command line's model settings."""
        model = _layer(model, self.yaml_model, f"{self.yaml_path}: model")
        return _layer(model, self.cli_model, "--set model.*")


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
        elif key.startswith("augment."):
            cli_train.setdefault("augment", {})[key[len("augment.") :]] = value
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
        ("max_tokens", cfg.max_tokens > 0, "> 0"),
        ("update_freq", cfg.update_freq >= 1, ">= 1"),
        ("lr", cfg.lr > 0, "> 0"),
        ("warmup_updates", cfg.warmup_updates >= 0, ">= 0"),
        ("warmup_init_lr", cfg.warmup_init_lr >= 0, ">= 0"),
        ("adam_eps", cfg.adam_eps > 0, "> 0"),
        (
            "adam_betas",
            len(cfg.adam_betas) == 2 and all(0 <= b < 1 for b in cfg.adam_betas),
            "two values in [0, 1)",
        ),
        ("weight_decay", cfg.weight_decay >= 0, ">= 0"),
        ("clip_norm", cfg.clip_norm >= 0, ">= 0"),
        ("label_smoothing", 0 <= cfg.label_smoothing < 1, "in [0, 1)"),
        ("max_updates", cfg.max_updates >= 0, ">= 0"),
        ("max_epochs", cfg.max_epochs >= 0, ">= 0"),
        ("max_time", cfg.max_time >= 0, ">= 0"),
        ("validate_every", cfg.validate_every >= 0, ">= 0"),
        ("valid_beam", cfg.valid_beam >= 1, ">= 1"),
        ("valid_max_sentences", cfg.valid_max_sentences >= 0, ">= 0"),
        ("save_every", cfg.save_every >= 0, ">= 0"),
        ("keep_last", cfg.keep_last >= 0, ">= 0"),
        ("patience", cfg.patience >= 0, ">= 0"),
        ("log_every", cfg.log_every >= 1, ">= 1"),
        ("num_workers", cfg.num_workers >= -1, ">= 0, or -1 (auto)"),
        ("nan_policy", cfg.nan_policy in ("stop", "skip"), "stop or skip"),
        ("compile", cfg.compile in COMPILE_MODES, " or ".join(COMPILE_MODES)),
        ("max_skipped_batches", cfg.max_skipped_batches >= 0, ">= 0"),
        ("pair_temperature", cfg.pair_temperature > 0, "> 0"),
    ]
    augment = cfg.augment
    rules += [
        (f"augment.{name}", 0 <= p <= 1, "in [0, 1]") for name, p in augment.probabilities().items()
    ]
    rules.append(("augment.typo_rate", 0 < augment.typo_rate <= 1, "in (0, 1]"))
    for name, ok, expected in rules:
        if not ok:
            value = cfg
            for part in name.split("."):
                value = getattr(value, part)
            raise MtkitError(f"{name} must be {expected}, got {value!r}")
    case = augment.uppercase + augment.titlecase + augment.lowercase
    if case > 1:
        raise MtkitError(f"augment.uppercase + titlecase + lowercase must be <= 1, got {case:g}")


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


def resume_configs(settings: Settings, ckpt: Checkpoint) -> tuple[TrainConfig, ModelConfig]:
    """The saved configs with the user's settings applied; refuse changes that matter."""
    saved, saved_model = ckpt.training_config(), ckpt.model_config
    cfg = train_config(settings, saved)
    if Path(cfg.data).resolve() == Path(saved.data).resolve():
        cfg = dataclasses.replace(cfg, data=saved.data)
    model = settings.model_over(saved_model)
    changes = [
        f"{k} {v!r} -> {asdict(cfg)[k]!r}"
        for k, v in asdict(saved).items()
        if k not in CHANGEABLE_ON_RESUME and asdict(cfg)[k] != v
    ]
    changes += [
        f"model.{k} {v!r} -> {asdict(model)[k]!r}"
        for k, v in asdict(saved_model).items()
        if asdict(model)[k] != v
    ]
    if changes:
        raise MtkitError(
            f"{cfg.run_dir} was trained with another config ({'; '.join(changes)}): only "
            f"{', '.join(sorted(CHANGEABLE_ON_RESUME - {'run_dir'}))} may change when resuming; "
            "use a new --run-dir to start over"
        )
    return cfg, model


def save_run_config(cfg: TrainConfig, model: ModelConfig) -> None:
    text = yaml.safe_dump({**asdict(cfg), "model": asdict(model)}, sort_keys=False)
    atomic_write_text(Path(cfg.run_dir) / CONFIG_FILE, text)


def init_model_config(settings: Settings, ckpt: Checkpoint) -> ModelConfig:
    """``--init-from``: the checkpoint's model config; only its dropouts may be set."""
    fixed = sorted(settings.model_keys() - INIT_CHANGEABLE)
    if fixed:
        raise MtkitError(
            f"--init-from {ckpt.where}: the model is the checkpoint's; "
            f"model.{fixed[0]} cannot be set "
            f"(only {', '.join(sorted(INIT_CHANGEABLE))})"
        )
    return settings.model_over(ckpt.model_config)
