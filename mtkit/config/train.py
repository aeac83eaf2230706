"""`mtkit train`: :class:`TrainConfig`."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    num_workers: int = 0
    nan_policy: str = "stop"  # stop | skip
    max_skipped_batches: int = 10
    # multilingual data: sample directions by size ** (1 / T); 1: every pair once per epoch
    pair_temperature: float = 1.0
