"""BLEU, chrF, chrF++ and TER, and paired significance tests: a thin layer over sacrebleu.

Every number comes from sacrebleu's library (Post, 2018, "A Call for Clarity in Reporting BLEU
Scores"), built exactly as the ``sacrebleu`` command builds it, so scores and signatures are the
command's own:

- BLEU (Papineni et al., 2002): ``sacrebleu.metrics.BLEU`` with ``tokenize`` and ``lowercase``.
- chrF (Popović, 2015) and chrF++ (Popović, 2017): ``sacrebleu.metrics.CHRF`` with
  ``word_order=0`` / ``2``; ``lowercase`` applies here too (``sacrebleu --chrf-lowercase``).
- TER (Snover et al., 2006): ``sacrebleu.metrics.TER`` with its defaults, which follow Tercom
  and ignore case (the signature says ``case:lc``).

Paired tests go through ``sacrebleu.significance.PairedTest``: bootstrap resampling (Koehn, 2004)
or approximate randomization (Riezler and Maxwell, 2005).

>>> config = EvaluateConfig(metrics=["chrf"])
>>> [r.text for r in score(["the cat sat"], [["the cat sat"]], config)]  # doctest: +ELLIPSIS
['chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:... = 100.0']
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sacrebleu.metrics import BLEU, CHRF, TER, BLEUScore, CHRFScore, TERScore
from sacrebleu.metrics.base import Metric, Score
from sacrebleu.significance import PairedTest, Result

from mtkit.config import EvaluateConfig
from mtkit.errors import MtkitError

METRICS = ("bleu", "chrf", "chrf++", "ter")
PAIRED_TESTS = {"bs": "paired bootstrap resampling", "ar": "approximate randomization"}
SIGNIFICANCE_LEVEL = 0.05


@dataclass
class MetricResult:
    """One corpus-level score with its sacrebleu signature.

    ``text`` is the line the ``sacrebleu`` command prints (``NAME|SIGNATURE = SCORE ...``);
    ``details`` holds the metric's extra fields (for BLEU: n-gram counts, precisions, BP, lengths).
    """

    name: str  # sacrebleu's name: BLEU, chrF2, chrF2++, TER
    score: float
    signature: str
    text: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "score": self.score, "signature": self.signature, **self.details}


@dataclass
class SystemResult:
    """One system in a paired test: its score, bootstrap mean and 95% CI, p-value vs baseline."""

    system: str
    score: float
    mean: float | None
    ci: float | None  # half-width of the 95% confidence interval around ``mean``
    p_value: float | None  # None for the baseline

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < SIGNIFICANCE_LEVEL

    def format(self, width: int) -> str:
        """``37.1 (μ = 37.0 ± 1.2) (p = 0.0010)*``, as sacrebleu writes them."""
        text = f"{self.score:.{width}f}"
        if self.mean is not None and self.ci is not None:
            text += f" (μ = {self.mean:.{width}f} ± {self.ci:.{width}f})"
        if self.p_value is not None:
            text += f" (p = {self.p_value:.4f})" + ("*" if self.significant else "")
        return text


@dataclass
class PairedResult:
    """A paired test for one metric: the baseline first, then every other system."""

    name: str
    signature: str
    systems: list[SystemResult]

    def to_dict(self) -> dict[str, Any]:
        systems = [dataclasses.asdict(s) | {"baseline": s.p_value is None} for s in self.systems]
        return {"name": self.name, "signature": self.signature, "systems": systems}

    def format(self, width: int) -> str:
        """The signature line, then one line per system (the baseline marked)."""
        names = [("Baseline: " if s.p_value is None else "") + s.system for s in self.systems]
        pad = max(len(n) for n in names)
        rows = [
            f"  {n:<{pad}}  {s.format(width)}" for n, s in zip(names, self.systems, strict=True)
        ]
        return "\n".join([f"{self.name}|{self.signature}", *rows])


def normalize_metrics(names: Sequence[str]) -> list[str]:
    """Lower-case, strip and de-duplicate metric names, rejecting unknown ones.

    >>> normalize_metrics(["BLEU", " chrF++", "bleu"])
    ['bleu', 'chrf++']
    """
    result: list[str] = []
    for raw in names:
        name = raw.strip().lower()
        if name not in METRICS:
            raise MtkitError(
                f"--metrics: unknown metric {raw.strip()!r} (known: {', '.join(METRICS)})"
            )
        if name not in result:
            result.append(name)
    if not result:
        raise MtkitError(f"--metrics: no metric given (known: {', '.join(METRICS)})")
    return result


def check_tokenizer(name: str) -> None:
    """Reject a BLEU tokenizer that sacrebleu does not know ("" means sacrebleu's default)."""
    if name and name not in BLEU.TOKENIZERS:
        known = ", ".join(BLEU.TOKENIZERS)
        raise MtkitError(f"--tokenize: unknown BLEU tokenizer {name!r} (sacrebleu has: {known})")


def build_metric(name: str, config: EvaluateConfig, refs: Sequence[Sequence[str]]) -> Metric:
    """The sacrebleu metric object for ``name``, with the references cached as the CLI does."""
    if name == "bleu":
        check_tokenizer(config.tokenize)
        try:
            return BLEU(
                lowercase=config.lowercase, tokenize=config.tokenize or None, references=refs
            )
        except (ImportError, RuntimeError, OSError) as err:  # mecab or spm model not available
            reason = next((s for s in str(err).splitlines() if s.strip()), type(err).__name__)
            raise MtkitError(
                f"--tokenize {config.tokenize}: unavailable ({reason.strip()})"
            ) from None
    if name in ("chrf", "chrf++"):
        word_order = 2 if name == "chrf++" else 0
        return CHRF(word_order=word_order, lowercase=config.lowercase, references=refs)
    if name == "ter":
        return TER(references=refs)
    raise MtkitError(f"--metrics: unknown metric {name!r} (known: {', '.join(METRICS)})")


def _check_corpus(hyps: Sequence[str], refs_list: Sequence[Sequence[str]]) -> None:
    if not refs_list:
        raise MtkitError("no references given")
    if not hyps:
        raise MtkitError("nothing to score: there are no hypotheses")
    for number, refs in enumerate(refs_list, 1):
        if len(refs) != len(hyps):
            raise MtkitError(
                f"line count mismatch: {len(hyps)} hypotheses, {len(refs)} lines in reference "
                f"{number}"
            )


def _details(result: Score) -> dict[str, Any]:
    """The metric-specific fields of a sacrebleu score, as plain JSON-able values."""
    if isinstance(result, BLEUScore):
        return {
            "verbose_score": result._verbose,  # the text after the score; no public accessor
            "counts": [int(c) for c in result.counts],
            "totals": [int(t) for t in result.totals],
            "precisions": [float(p) for p in result.precisions],
            "bp": float(result.bp),
            "ratio": float(result.ratio),
            "sys_len": int(result.sys_len),
            "ref_len": int(result.ref_len),
        }
    if isinstance(result, CHRFScore):
        return {
            "char_order": result.char_order,
            "word_order": result.word_order,
            "beta": result.beta,
        }
    if isinstance(result, TERScore):
        return {"num_edits": int(result.num_edits), "ref_length": float(result.ref_length)}
    return {}


def score(
    hyps: Sequence[str], refs_list: Sequence[Sequence[str]], config: EvaluateConfig
) -> list[MetricResult]:
    """Score ``hyps`` against one or more parallel reference streams with ``config.metrics``.

    :param hyps: one hypothesis per segment.
    :param refs_list: one list per reference translation, each as long as ``hyps``.
    :param config: metrics, BLEU tokenizer, lowercasing and the printed width.
    """
    names = normalize_metrics(config.metrics)
    check_tokenizer(config.tokenize)
    _check_corpus(hyps, refs_list)
    results = []
    for name in names:
        metric = build_metric(name, config, refs_list)
        result = metric.corpus_score(hyps, None)
        signature = metric.get_signature().format()
        text = result.format(width=config.width, signature=signature)
        results.append(
            MetricResult(result.name, float(result.score), signature, text, _details(result))
        )
    return results


@contextlib.contextmanager
def _sacrebleu_seed(seed: int) -> Iterator[None]:
    """sacrebleu's paired tests read their seed from ``SACREBLEU_SEED``; set it for a while."""
    old = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if old is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = old


def _check_paired(config: EvaluateConfig, n_systems: int) -> None:
    if config.paired not in PAIRED_TESTS:
        raise MtkitError(f"--paired: unknown test {config.paired!r} (known: bs, ar)")
    if n_systems < 2:
        raise MtkitError("a paired test needs a baseline and at least one other system")
    if config.seed < 1:  # sacrebleu treats a seed of 0 as "no seed"
        raise MtkitError(f"--seed must be a positive integer, got {config.seed}")
    if config.paired_bs_n < 1 or config.paired_ar_n < 1:
        raise MtkitError("--paired-bs-n and --paired-ar-n must be positive")


def _system_result(
    name: str, result: Result | str, baseline: bool, identical: bool
) -> SystemResult:
    """Plain floats from sacrebleu's Result (numpy scalars inside); see paired_test for p = 1.0."""
    assert isinstance(result, Result), result
    mean = None if result.mean is None else float(result.mean)
    ci = None if result.ci is None else float(result.ci)
    p_value = None if baseline else 1.0 if identical else float(result.p_value)
    return SystemResult(name, float(result.score), mean, ci, p_value)


def paired_test(
    systems: Sequence[tuple[str, Sequence[str]]],
    refs_list: Sequence[Sequence[str]],
    config: EvaluateConfig,
) -> list[PairedResult]:
    """Compare every system with the first (the baseline), metric by metric.

    ``config.paired`` picks paired bootstrap resampling (``bs``, ``config.paired_bs_n``
    resamples) or approximate randomization (``ar``, ``config.paired_ar_n`` trials, with a
    bootstrap of ``config.paired_bs_n`` resamples for the confidence intervals), seeded with
    ``config.seed``. p-values are sacrebleu's, with one exception: a system whose output is
    identical to the baseline's gets p = 1.0, where sacrebleu's strict ``>`` count reports
    1/(n+1), as if identical outputs differed significantly.
    """
    _check_paired(config, len(systems))
    names = normalize_metrics(config.metrics)
    check_tokenizer(config.tokenize)
    for _, hyps in systems:
        _check_corpus(hyps, refs_list)
    metrics = {name: build_metric(name, config, refs_list) for name in names}
    test = config.paired
    n = config.paired_bs_n if test == "bs" else config.paired_ar_n
    confidence = -1 if test == "bs" else config.paired_bs_n
    named = [(name, list(hyps)) for name, hyps in systems]
    with _sacrebleu_seed(config.seed):
        tester = PairedTest(
            named,
            metrics,
            references=None,
            test_type=test,
            n_samples=n,
            n_ar_confidence=confidence,
            n_jobs=1,
        )
        signatures, columns = tester()
    baseline = named[0][1]
    results = []
    for metric_name, column in columns.items():
        if metric_name == "System":
            continue
        rows = [
            _system_result(system, res, baseline=i == 0, identical=hyps == baseline)
            for i, ((system, hyps), res) in enumerate(zip(named, column, strict=True))
        ]
        results.append(PairedResult(metric_name, signatures[metric_name].format(), rows))
    return results
