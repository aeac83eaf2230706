"""Confidence against quality (issue 29): how well each sentence score predicts sentence chrF.

Each Multi30k set (default test_2016_flickr and val, en->de) is translated as ``mtkit
translate --scores`` translates it (the text layer, one sentence per line, spans kept), and
every candidate score of each translation (:mod:`mtkit.engines.confidence`) is correlated with
its sentence-level chrF against the reference (``sacrebleu.sentence_chrf``): Pearson's r and
Spearman's rho (Pearson's r of the ranks, ties given their mean rank). The candidates:

- ``normalized``: logprob / (pieces + EOS), what ``--scores`` writes;
- ``probability``: exp(normalized), what the server answers as ``confidence``;
- ``mean_prob``: the mean of the pieces' probabilities; ``min_prob``: the least likely piece's;
- ``logprob``: the raw sum (longer sentences score lower whatever their quality);
- ``mean_word`` / ``min_word``: the mean and the least of the per-word scores.

Then, for flagging: the mean chrF of the lowest-``probability`` 10 % of each set against the
rest. Sentences with nothing to translate are left out (there are none in Multi30k).

    .venv/bin/python benchmarks/bench_confidence.py [CKPT] [--sets test_2016_flickr,val]
        [--beam 5] [--threads 1] [--limit N]

CKPT defaults to the `make demo` model (work/demo/en-de/demo-run/checkpoint_last.pt).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import sacrebleu
from machine import print_machine
from multi30k import DEMO_CHECKPOINT, read_text

from mtkit.config import TranslateConfig
from mtkit.engines import load_engine
from mtkit.engines.base import Engine
from mtkit.engines.confidence import Confidence
from mtkit.text import TextOptions, translate_texts

CANDIDATES: dict[str, Callable[[Confidence], float]] = {
    "normalized": lambda c: c.normalized,
    "probability": lambda c: c.probability,
    "mean_prob": lambda c: c.mean_prob,
    "min_prob": lambda c: c.min_prob,
    "logprob": lambda c: c.logprob,
    "mean_word": lambda c: sum(w := c.word_scores()) / len(w) if c.words else 0.0,
    "min_word": lambda c: min(c.word_scores(), default=0.0),
}
FLAG_SHARE = 0.1
DEMO = DEMO_CHECKPOINT  # `make demo`


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson's correlation coefficient (NaN when either side is constant)."""
    n = len(x)
    mx, my = math.fsum(x) / n, math.fsum(y) / n
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx, syy = math.fsum((a - mx) ** 2 for a in x), math.fsum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else math.nan


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, tied values sharing their mean rank.

    >>> ranks([3.0, 1.0, 3.0, 2.0])
    [3.5, 1.0, 3.5, 2.0]
    """
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            out[order[k]] = (start + end) / 2 + 1
        start = end + 1
    return out


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    return pearson(ranks(x), ranks(y))


def scored_set(
    engine: Engine, name: str, beam: int, limit: int = 0
) -> tuple[list[Confidence], list[float], float]:
    """One set (its first ``limit`` sentences, 0: all) translated with scores: each
    sentence's confidence and chrF, and the seconds it took."""
    src, ref = read_text(name, "en"), read_text(name, "de")
    if limit:
        src, ref = src[:limit], ref[:limit]
    search = engine.config.search.replace(beam=beam, scores=True)
    start = time.perf_counter()
    found = translate_texts(engine, src, TextOptions(split=False), search)
    seconds = time.perf_counter() - start
    kept = [(t, r) for t, r in zip(found, ref, strict=True) if t.confidence and t.text.strip()]
    chrf = [sacrebleu.sentence_chrf(t.text, [r]).score for t, r in kept]
    hyps, refs = [t.text for t, _ in kept], [[r for _, r in kept]]
    corpus = sacrebleu.corpus_chrf(hyps, refs).score
    bleu = sacrebleu.corpus_bleu(hyps, refs).score
    print(
        f"{name}: {len(kept)} sentences in {seconds:.0f} s, corpus chrF {corpus:.1f}, "
        f"BLEU {bleu:.1f}"
    )
    return [t.confidence for t, _ in kept if t.confidence], chrf, seconds


def flagged(scores: list[float], chrf: list[float]) -> str:
    """Mean chrF of the lowest-scored FLAG_SHARE of the sentences, and of the rest."""
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    cut = max(1, round(len(order) * FLAG_SHARE))
    low, rest = [chrf[i] for i in order[:cut]], [chrf[i] for i in order[cut:]]
    threshold = scores[order[cut - 1]]
    return (
        f"lowest {FLAG_SHARE:.0%} by probability (<= {threshold:.3f}): mean chrF "
        f"{sum(low) / len(low):.1f}, the rest {sum(rest) / len(rest):.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", nargs="?", default=str(DEMO))
    parser.add_argument("--sets", default="test_2016_flickr,val")
    parser.add_argument("--limit", type=int, default=0, help="Sentences per set (0: all).")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if not Path(args.checkpoint).is_file():
        raise SystemExit(f"{args.checkpoint}: no checkpoint (`make demo` trains one)")
    print_machine()
    config = TranslateConfig.from_flat({"threads": args.threads, "device": "cpu"})
    engine = load_engine([args.checkpoint], config)
    table = {}
    for name in args.sets.split(","):
        confidence, chrf, _ = scored_set(engine, name, args.beam, args.limit)
        for key, score in CANDIDATES.items():
            values = [score(c) for c in confidence]
            table[(name, key)] = (pearson(values, chrf), spearman(values, chrf))
        print(flagged([c.probability for c in confidence], chrf))
    sets = args.sets.split(",")
    print("\n| score | " + " | ".join(f"{s} Pearson | {s} Spearman" for s in sets) + " |")
    print("| --- |" + " ---: | ---: |" * len(sets))
    for key in CANDIDATES:
        cells = " | ".join(f"{table[(s, key)][0]:.3f} | {table[(s, key)][1]:.3f}" for s in sets)
        print(f"| {key} | {cells} |")
    best = max(
        CANDIDATES,
        key=lambda k: (
            round(sum(table[(s, k)][1] for s in sets), 6),
            sum(table[(s, k)][0] for s in sets),
        ),
    )
    print(f"\nbest by mean Spearman over the sets (then Pearson): {best}")


if __name__ == "__main__":
    main()
