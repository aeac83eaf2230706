"""`mtkit evaluate`: read (or translate) hypotheses, check them against the references, score.

Files are read with :func:`mtkit.pipeline.textio.read_lines` (UTF-8, BOM and CRLF accepted) and
each segment loses its trailing whitespace, as the ``sacrebleu`` command does, so the scores
are the command's own. The checks run before any expensive work (translating, resampling):
options, references and other systems parallel to each other and to the hypotheses (or the
source), the output directory present.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mtkit.config import EvaluateConfig, TranslateConfig
from mtkit.errors import MtkitError
from mtkit.metrics import (
    PAIRED_TESTS,
    MetricResult,
    PairedResult,
    check_tokenizer,
    normalize_metrics,
    paired_test,
    score,
)
from mtkit.pipeline.textio import STDIN, atomic_write_lines, display_name, read_lines

log = logging.getLogger(__name__)


@dataclass
class EvaluateReport:
    """What `mtkit evaluate` found: plain scores, or a paired test between systems."""

    scores: list[MetricResult] = field(default_factory=list)
    paired: list[PairedResult] = field(default_factory=list)
    test: str = ""  # bs | ar when ``paired`` is filled
    samples: int = 0  # resamples (bs) or trials (ar)
    width: int = 1

    def to_text(self) -> str:
        """sacrebleu's lines: ``NAME|SIGNATURE = SCORE ...``; or one block per metric."""
        if not self.paired:
            return "\n".join(result.text for result in self.scores)
        unit = "resamples" if self.test == "bs" else "trials"
        head = (
            f"{PAIRED_TESTS[self.test].capitalize()} ({self.samples} {unit}): score "
            f"(μ = bootstrap mean ± 95% CI), p-value against the baseline, * for p < 0.05"
        )
        return "\n".join([head, *(result.format(self.width) for result in self.paired)])

    def to_json(self) -> str:
        if not self.paired:
            return json.dumps([r.to_dict() for r in self.scores], indent=1, ensure_ascii=False)
        extra = {"test": self.test, "samples": self.samples}
        items = [r.to_dict() | extra for r in self.paired]
        return json.dumps(items, indent=1, ensure_ascii=False)


def read_segments(path: str) -> list[str]:
    """The lines of ``path`` without trailing whitespace (sacrebleu's ``line.rstrip()``)."""
    return [line.rstrip() for line in read_lines(path)]


def check_parallel(named: Sequence[tuple[str, Sequence[str]]]) -> None:
    """Raise MtkitError naming both files and both counts if the line counts differ.

    >>> check_parallel([("hyp.txt", ["a", "b"]), ("ref.txt", ["a"])])
    Traceback (most recent call last):
    ...
    mtkit.errors.MtkitError: line count mismatch: hyp.txt has 2 lines, ref.txt has 1
    """
    first_name, first = named[0]
    for name, lines in named[1:]:
        if len(lines) != len(first):
            raise MtkitError(
                f"line count mismatch: {first_name} has {len(first)} lines, {name} has {len(lines)}"
            )


def _check_options(config: EvaluateConfig) -> None:
    """Option combinations, before any file is read."""
    if not config.refs:
        raise MtkitError("no reference given (-r REF)")
    normalize_metrics(config.metrics)
    check_tokenizer(config.tokenize)
    if config.checkpoints:
        if not config.src:
            raise MtkitError("-m/--model needs --src, the source file to translate")
        if config.input != STDIN:
            raise MtkitError("give either -i (hypotheses) or -m with --src (translate), not both")
        if config.output and Path(config.output).is_dir():
            raise MtkitError(f"{config.output}: is a directory")
    elif config.src:
        raise MtkitError("--src is only used with -m/--model")
    elif config.output:
        raise MtkitError("--output is only used with -m/--model")
    if not 0 <= config.width <= 10:
        raise MtkitError(f"--width must be between 0 and 10, got {config.width}")
    if config.compare and config.paired not in PAIRED_TESTS:
        raise MtkitError(f"--paired: unknown test {config.paired!r} (known: bs, ar)")


def _read_references(paths: Sequence[str]) -> list[list[str]]:
    refs = [read_segments(path) for path in paths]
    check_parallel([(display_name(p), r) for p, r in zip(paths, refs, strict=True)])
    return refs


def _translate(
    config: EvaluateConfig, translate_config: TranslateConfig | None, refs: Sequence[str]
) -> list[str]:
    """Translate ``config.src`` with ``config.checkpoints``; write them to ``config.output``."""
    try:
        from mtkit.pipeline.translate import translate_lines  # lazy: imports torch
    except ModuleNotFoundError as err:
        if err.name != "mtkit.pipeline.translate":
            raise
        raise MtkitError("-m/--model: this mtkit build has no translation engine") from None
    src_name = display_name(config.src)
    src = read_lines(config.src)
    check_parallel([(src_name, src), (display_name(config.refs[0]), refs)])
    if not src:
        raise MtkitError(f"{src_name}: no lines, nothing to translate")
    log.info("translating %d lines of %s with %s", len(src), src_name, config.checkpoints)
    hyps = translate_lines(list(config.checkpoints), src, translate_config or TranslateConfig())
    check_parallel([(src_name, src), ("the translation", hyps)])
    if config.output:
        atomic_write_lines(config.output, hyps)
    return [line.rstrip() for line in hyps]


def _hypotheses(
    config: EvaluateConfig, translate_config: TranslateConfig | None, refs: list[list[str]]
) -> tuple[str, list[str]]:
    """The system's name and its segments: translated (-m) or read (-i, stdin by default)."""
    if config.checkpoints:
        return "+".join(config.checkpoints), _translate(config, translate_config, refs[0])
    name = display_name(config.input)
    if config.input == STDIN and sys.stdin is not None and sys.stdin.isatty():
        raise MtkitError("no hypotheses: give -i HYP, or pipe them into stdin")
    hyps = read_segments(config.input)
    check_parallel([(name, hyps), (display_name(config.refs[0]), refs[0])])
    if not hyps:
        raise MtkitError(f"{name}: no lines, nothing to score")
    return name, hyps


def evaluate(
    config: EvaluateConfig, translate_config: TranslateConfig | None = None
) -> EvaluateReport:
    """Score a system (or translate ``config.src`` and score that) against ``config.refs``.

    With ``config.compare``, run a paired test of those systems against this one instead.
    ``translate_config`` is used with ``config.checkpoints`` only (default: TranslateConfig()).
    """
    log.info("evaluate: %s", asdict(config))
    _check_options(config)
    refs = _read_references(config.refs)
    others = [(display_name(path), read_segments(path)) for path in config.compare]
    check_parallel([(display_name(config.refs[0]), refs[0]), *others])
    name, hyps = _hypotheses(config, translate_config, refs)
    if not config.compare:
        return EvaluateReport(scores=score(hyps, refs, config), width=config.width)
    samples = config.paired_bs_n if config.paired == "bs" else config.paired_ar_n
    paired = paired_test([(name, hyps), *others], refs, config)
    return EvaluateReport(paired=paired, test=config.paired, samples=samples, width=config.width)
