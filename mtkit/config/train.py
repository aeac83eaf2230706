"""`mtkit train`: :class:`TrainConfig`."""

from __future__ import annotations

from dataclasses import dataclass, field

from mtkit.errors import MtkitError


@dataclass
class AugmentConfig:
    """On-the-fly augmentation (:mod:`mtkit.training.augment`): each field the probability that
    a training pair is changed so in an epoch; all 0: the data as prepared."""

    uppercase: float = 0.0  # both sides in UPPER CASE
    titlecase: float = 0.0  # both sides in Title Case (every word's first letter upper)
    lowercase: float = 0.0  # the source in lower case (the target as it is)
    typos: float = 0.0  # typos in the source: characters dropped, swapped, doubled, or replaced
    typo_rate: float = 0.15  # share of a chosen source's words (3+ letters) given a typo
    merge: float = 0.0  # the pair and the next 1-3 joined into one (half without final stops)
    noise: float = 0.0  # replaced by a line of emoji, symbols and numbers, copied to the target

    def any(self) -> bool:
        return any(p > 0 for p in self.probabilities().values())

    def probabilities(self) -> dict[str, float]:
        """Each modifier's probability, by name."""
        return {name: getattr(self, name) for name in AUGMENT_MODIFIERS}


AUGMENT_MODIFIERS = ("uppercase", "titlecase", "lowercase", "typos", "merge", "noise")
# `--augment default`: what the demo configuration measured best at 600 updates
# (benchmarks/bench_robustness.py --ablation): lower case, typos, run-ons and noise. No
# upper-cased or title-cased pairs: they cost clean BLEU (-3.0 with both at 0.05) and did not
# teach capitals at that budget, and the decoding guard translates ALL CAPS and Title Case
# lines lowercased, their case put back (mtkit.engines.guard), which the lowercase pairs teach.
AUGMENT_DEFAULT = {"lowercase": 0.1, "typos": 0.05, "merge": 0.05, "noise": 0.005}


def augment_spec(text: str) -> dict[str, float]:
    """``--augment``: ``default`` (:data:`AUGMENT_DEFAULT`), ``none``, or ``NAME=P,...``
    (the fields of :class:`AugmentConfig` named; the others 0).

    >>> augment_spec("uppercase=0.1, typos=0.05")["typos"], augment_spec("none")["merge"]
    (0.05, 0.0)
    """
    values = dict.fromkeys(AUGMENT_MODIFIERS, 0.0)
    if text.strip() == "default":
        return {**values, **AUGMENT_DEFAULT}
    if text.strip() == "none":
        return values
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in AugmentConfig.__dataclass_fields__:
            raise MtkitError(
                f"--augment {text!r}: expected default, none or NAME=P,... with NAME one of "
                f"{', '.join(AugmentConfig.__dataclass_fields__)}"
            )
        try:
            values[name.strip()] = float(value)
        except ValueError:
            raise MtkitError(f"--augment {text!r}: {name.strip()} must be a number") from None
    return values


@dataclass
class TrainConfig:
    """`mtkit train`: optimisation, batching, validation and checkpointing."""

    data: str = ""  # binarized dataset directory (mtkit prepare)
    run_dir: str = "runs/default"
    preset: str = "transformer-small"
    init_from: str = ""  # a checkpoint whose architecture and weights start a new run
    seed: int = 1
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    # auto (CUDA: bf16 if supported, else fp16; CPU: see mtkit/cpu.py) | fp32 | bf16 | fp16
    precision: str = "auto"
    # off | on | auto (CUDA: on; CPU: off, measured; see mtkit/training/compiled.py)
    compile: str = "off"
    # per batch and process: pairs x (max(source, target) + 1) of its longest pair, padding counted
    max_tokens: int = 4096
    update_freq: int = 1  # gradient accumulation
    lr: float = 7e-4
    warmup_updates: int = 4000
    warmup_init_lr: float = 1e-7
    adam_betas: list[float] = field(default_factory=lambda: [0.9, 0.98])
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    clip_norm: float = 1.0  # 0: no clipping
    label_smoothing: float = 0.1
    max_updates: int = 0  # 0: no limit
    max_epochs: int = 0  # 0: no limit
    max_time: float = 0.0  # wall-clock budget in seconds; 0: no limit
    validate_every: int = 1000  # updates
    validate_bleu: bool = True
    valid_beam: int = 1
    valid_max_sentences: int = 0  # decode at most this many validation sentences (0: all)
    save_every: int = 1000  # updates
    keep_last: int = 5
    patience: int = 0  # early stop after this many validations without BLEU gain; 0: never
    log_every: int = 50
    num_workers: int = -1  # processes loading batches; -1: auto (training.batching.resolve_workers)
    nan_policy: str = "stop"  # stop | skip
    max_skipped_batches: int = 10
    # multilingual data: sample directions by size ** (1 / T); 1: every pair once per epoch
    pair_temperature: float = 1.0
    augment: AugmentConfig = field(default_factory=AugmentConfig)
