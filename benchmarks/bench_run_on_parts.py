"""Run-ons without sentence ends: parts at the longest training length against parts of the
training sentences' typical length (``SentenceStyle.length``), in one run.

The Multi30k val captions, ``--per-line`` to a line, in three forms: lowercased without
``.`` and ``,`` (``lower``), cased without ``.`` (``cased``: cut where an opener follows a
lowercase word), and as written (``marked``). Each line is translated as ``mtkit translate``
translates a line (no ``--split-sentences``): a line longer than the trained length in its
own sentences, one still longer in parts at the longest length (``longest``) or, where it
marks no sentence end, of the typical length (``typical``), each at the length's nearest
space or where the training sentences' edges say a sentence most likely ends (``at edges``);
with the checkpoint's records, or, where the checkpoint is older than them, the records a
checkpoint trained today would hold (the longest and the 95th-percentile source of the
training file, its sentence style and edges). BLEU
(sacrebleu) of each line against its captions' references joined, and the share of the
references' words that come back.

    .venv/bin/python benchmarks/bench_run_on_parts.py CKPT [--per-line 10] [--dtype fast]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import replace

import sacrebleu
from machine import print_machine
from multi30k import read_text

from mtkit.config import TranslateConfig
from mtkit.data.sentence_edges import SentenceEdges
from mtkit.data.sentence_style import LENGTH_SHARE, style_of
from mtkit.engines import load_engine
from mtkit.pipeline.translate import text_options
from mtkit.text.translate import translate_texts


def forms(lines: list[str], per_line: int) -> dict[str, list[str]]:
    groups = [lines[i : i + per_line] for i in range(0, len(lines), per_line)]
    return {
        "lower": [" ".join(re.sub(r"[.,]", "", s).lower() for s in g) for g in groups],
        "cased": [" ".join(s.replace(".", "") for s in g) for g in groups],
        "marked": [" ".join(g) for g in groups],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--per-line", type=int, default=10)
    parser.add_argument("--dtype", default="fast")
    parser.add_argument("--split", default="val", help="Multi30k split (en -> de)")
    args = parser.parse_args()
    print_machine()
    engine = load_engine([args.checkpoint], TranslateConfig.from_flat({"dtype": args.dtype}))
    style = engine.sentence_style
    if engine.trained_pieces is None or not style.length or not style.edges:
        train = read_text("train", "en")
        sizes = sorted(len(ids) for ids in engine.src_tokenizer.encode(train))
        typical = sizes[min(len(sizes) - 1, len(sizes) * LENGTH_SHARE // 100)]
        engine.trained_pieces = engine.trained_pieces or sizes[-1]
        engine.sentence_style = replace(style_of(train), length=typical)
        print("records (from Multi30k train.en, as a checkpoint trained today holds them):")
    print(
        f"longest training source {engine.trained_pieces} pieces, typical "
        f"({LENGTH_SHARE}th percentile) {engine.sentence_style.length}"
    )
    src, ref = read_text(args.split, "en"), read_text(args.split, "de")
    refs = [" ".join(ref[i : i + args.per_line]) for i in range(0, len(ref), args.per_line)]
    words = sum(len(r.split()) for r in refs)
    options = text_options(engine)
    print(f"{len(src)} {args.split} captions, {args.per_line} to a line ({len(refs)} lines)")
    print("| form | parts at | BLEU | words out / reference | seconds |")
    print("|---|---|--:|--:|--:|")
    typical, edges = engine.sentence_style.length, engine.sentence_style.edges
    for form, texts in forms(src, args.per_line).items():
        for name, part, cut in (
            ("longest", 0, SentenceEdges()),
            ("typical", typical, SentenceEdges()),
            ("longest, at edges", 0, edges),
            ("typical, at edges", typical, edges),
        ):
            style = replace(options.style, edges=cut)
            start = time.perf_counter()
            found = [
                t.text
                for t in translate_texts(engine, texts, replace(options, part=part, style=style))
            ]
            took = time.perf_counter() - start
            bleu = sacrebleu.corpus_bleu(found, [refs]).score
            share = sum(len(t.split()) for t in found) / words
            print(f"| {form} | {name} | {bleu:.1f} | {share:.0%} | {took:.1f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
