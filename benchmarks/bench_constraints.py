"""Terminology constraints (issue 29): met, quality with and without them, and their cost.

A terminology test built from a Multi30k set (default test_2016_flickr, en->de): each line is
first translated without constraints (beam 5, the text layer as `mtkit translate` runs it);
then its terms are the reference words that translation misses, chosen deterministically: the
reference's whitespace words stripped of surrounding punctuation, at least
``--min-chars`` (4) characters long, not a word of the unconstrained output, the longest first
(ties: the earlier), at most ``--terms`` (2) per line. A line without such a word has no terms.
The same lines are translated again with their terms as constraints (``mtkit translate
--constraints``' search). Reported:

- the share of terms met: found in the constrained output on word boundaries (not inside a
  longer word; "Iglu" is met by "Iglu-Bau", as the search counts it, but not by "Iglus");
  every term fits its line's length limit here, so all are satisfiable;
- BLEU and chrF (sacrebleu) with and without constraints, on all lines and on the lines
  with terms (the terms come from the reference, so the constrained output should gain);
- decoding speed with constraints as a ratio to without: the lines with terms, both ways,
  through the same engine, interleaved rounds, the median of each.

    .venv/bin/python benchmarks/bench_constraints.py [CKPT] [--set test_2016_flickr]
        [--beam 5] [--threads 1] [--rounds 3] [--limit N]

CKPT defaults to the `make demo` model (work/demo/en-de/demo-run/checkpoint_last.pt).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path

import sacrebleu
from machine import print_machine
from multi30k import DEMO_CHECKPOINT, read_text

from mtkit.config import TranslateConfig
from mtkit.engines import load_engine
from mtkit.engines.base import Engine
from mtkit.text import TextOptions, translate_texts
from mtkit.text.glossary import constraining

DEMO = DEMO_CHECKPOINT  # `make demo`
PUNCTUATION = ".,;:!?\"'()[]«»„“”‚‘’-"


def words(text: str) -> list[str]:
    return [w.strip(PUNCTUATION) for w in text.split()]


def pick_terms(reference: str, output: str, count: int, min_chars: int) -> list[str]:
    """The reference's longest words (at least ``min_chars``) that ``output`` lacks."""
    have = set(words(output))
    found = [w for w in dict.fromkeys(words(reference)) if len(w) >= min_chars and w not in have]
    return sorted(found, key=lambda w: -len(w))[:count]


def translate(engine: Engine, lines: list[str], terms: list[list[str]] | None) -> list[str]:
    """``lines`` through the text layer, each with its ``terms`` (None: unconstrained)."""
    search = engine.config.search.replace(constraints="unordered" if terms is not None else "")
    given = None if terms is None else dict(enumerate(terms, start=1))
    constrain = None if given is None else constraining(None, given)
    found = translate_texts(
        engine, lines, TextOptions("en", split=False), search, constrain=constrain
    )
    return [t.text for t in found]


def scores(hyps: list[str], refs: list[str]) -> str:
    bleu = sacrebleu.corpus_bleu(hyps, [refs]).score
    chrf = sacrebleu.corpus_chrf(hyps, [refs]).score
    return f"BLEU {bleu:5.2f}  chrF {chrf:5.2f}"


def timed(engine: Engine, lines: list[str], terms: list[list[str]] | None) -> float:
    start = time.perf_counter()
    translate(engine, lines, terms)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", nargs="?", default=str(DEMO))
    parser.add_argument("--set", default="test_2016_flickr")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--terms", type=int, default=2)
    parser.add_argument("--min-chars", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=0)
    args = parser.parse_args()
    if not Path(args.checkpoint).is_file():
        raise SystemExit(f"{args.checkpoint}: no checkpoint (run `make demo` first)")
    print_machine()
    src, refs = read_text(args.set, "en"), read_text(args.set, "de")
    if args.limit:
        src, refs = src[: args.limit], refs[: args.limit]
    config = TranslateConfig.from_flat(
        {"beam": args.beam, "threads": args.threads, "device": "cpu"}
    )
    engine = load_engine([args.checkpoint], config)
    plain = translate(engine, src, None)
    terms = [pick_terms(r, o, args.terms, args.min_chars) for r, o in zip(refs, plain, strict=True)]
    constrained = translate(engine, src, terms)
    given = sum(len(t) for t in terms)
    met = sum(
        bool(re.search(rf"(?<!\w){re.escape(t)}(?!\w)", out))
        for ts, out in zip(terms, constrained, strict=True)
        for t in ts
    )
    with_terms = [i for i, t in enumerate(terms) if t]
    print(
        f"\n{args.set}, {len(src)} lines, beam {args.beam}, {args.threads} thread(s), "
        f"{args.checkpoint}"
    )
    print(
        f"terms: {given} on {len(with_terms)} lines (at most {args.terms} a line, >= "
        f"{args.min_chars} characters); met {met} = {100 * met / max(given, 1):.1f} %"
    )
    print(f"all lines         without: {scores(plain, refs)}   with: {scores(constrained, refs)}")
    pick = [plain[i] for i in with_terms], [constrained[i] for i in with_terms]
    sub_refs = [refs[i] for i in with_terms]
    print(
        f"lines with terms  without: {scores(pick[0], sub_refs)}   with: "
        f"{scores(pick[1], sub_refs)}"
    )
    lines = [src[i] for i in with_terms]
    line_terms = [terms[i] for i in with_terms]
    plain_s, cons_s = [], []
    for _ in range(args.rounds):  # interleaved: A B A B ...
        plain_s.append(timed(engine, lines, None))
        cons_s.append(timed(engine, lines, line_terms))
    a, b = statistics.median(plain_s), statistics.median(cons_s)
    print(
        f"speed on the {len(lines)} lines with terms (median of {args.rounds}): without "
        f"{len(lines) / a:.1f} sentences/s, with {len(lines) / b:.1f} sentences/s: "
        f"{a / b:.2f}x"
    )


if __name__ == "__main__":
    main()
