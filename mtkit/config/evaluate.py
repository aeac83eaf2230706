"""`mtkit evaluate`: :class:`EvaluateConfig`."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class EvaluateConfig:
    """`mtkit evaluate`: sacrebleu metrics."""

    metrics: list[str] = field(default_factory=lambda: ["bleu", "chrf", "ter"])  # + chrf++
    tokenize: str = ""  # "" : sacrebleu's default for the metric (13a for BLEU)
    lowercase: bool = False  # BLEU and chrF; TER ignores case anyway (sacrebleu's default)
    paired_bs_n: int = 1000
    paired_ar_n: int = 10000
    seed: int = 12345
    input: str = "-"  # hypotheses, one per line; "-": stdin
    refs: list[str] = field(default_factory=list)  # one file per reference translation
    compare: list[str] = field(default_factory=list)  # other systems: paired test vs `input`
    paired: str = "bs"  # bs (paired bootstrap resampling) | ar (approximate randomization)
    checkpoints: list[str] = field(default_factory=list)  # translate `src` instead of `input`
    src: str = ""  # source file translated with `checkpoints`
    output: str = ""  # with `checkpoints`: also write the translations here
    width: int = 1  # decimals printed (as `sacrebleu -w`)
