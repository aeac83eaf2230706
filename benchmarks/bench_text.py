"""Text, not sentences (issue 27): BLEU and kept words when test_2016_flickr is joined N
sentences to a line, translated as it is and with sentence splitting (``--split-sentences``).

For each join N (default 1, 2, 4, 8) the English test set is joined N lines to one (with a
space) and translated twice with the same engine: each joined line as one sentence (what
``mtkit translate`` does by default), and each joined line as a text (segmented, translated
sentence by sentence, sentences the segmenter merged cut again, rebuilt:
``--split-sentences``). Each output is scored against the German reference joined the same
way (sacreBLEU, 13a, as ``mtkit evaluate``), and its words are
counted against the reference's and against the sentence-by-sentence translation of the
unjoined test set, joined afterwards (the ceiling). Outputs are written to ``--out`` so that
``mtkit evaluate -i OUT/join4.split.de -r OUT/join4.ref.de`` gives the same figures.

    .venv/bin/python benchmarks/bench_text.py CKPT [--joins 1,2,4,8] [--threads 1] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import sacrebleu
from multi30k import read_text

from mtkit.config import TranslateConfig
from mtkit.engines import load_engine
from mtkit.engines.base import Engine, best_texts
from mtkit.text import translate_text


def joined(lines: list[str], n: int) -> list[str]:
    return [" ".join(lines[i : i + n]) for i in range(0, len(lines), n)]


def words(lines: list[str]) -> int:
    return sum(len(line.split()) for line in lines)


def timed(engine: Engine, lines: list[str], split: bool) -> tuple[list[str], float]:
    start = time.perf_counter()
    if split:
        out = translate_text(engine, lines, "en")
    else:
        out = best_texts(engine.translate(lines))
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--joins", default="1,2,4,8")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(".bench/text"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    src, ref = read_text("test_2016_flickr", "en"), read_text("test_2016_flickr", "de")
    config = TranslateConfig.from_flat({"threads": args.threads, "device": "cpu",
                                        "beam": args.beam})  # fmt: skip
    engine = load_engine([args.checkpoint], config)
    alone, seconds = timed(engine, src, split=False)
    print(f"sentence by sentence: {len(src)} lines in {seconds:.1f}s")
    print("join  mode       lines  BLEU   words/ref  words/alone  seconds")
    for n in [int(x) for x in args.joins.split(",")]:
        refs, ceiling = joined(ref, n), joined(alone, n)
        (args.out / f"join{n}.ref.de").write_text("".join(r + "\n" for r in refs), "utf-8")
        rows = [("alone", ceiling, seconds)]
        for split in (False, True):
            out, took = timed(engine, joined(src, n), split)
            rows.append(("split" if split else "as-is", out, took))
        for mode, out, took in rows:
            (args.out / f"join{n}.{mode}.de").write_text("".join(o + "\n" for o in out), "utf-8")
            bleu = sacrebleu.corpus_bleu(out, [refs]).score
            print(f"{n:>4}  {mode:<9} {len(out):>6}  {bleu:5.1f}  "
                  f"{words(out) / words(refs):9.1%}  {words(out) / words(ceiling):11.1%}  "
                  f"{took:7.1f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
