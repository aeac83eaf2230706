"""Text, not sentences (issue 27): BLEU, kept words and throughput when test_2016_flickr is
joined N sentences to a line, translated as it is, with sentence splitting
(``--split-sentences``) and as an HTML document (``--format html``).

For each join N (default 1, 2, 4, 8) the English test set is joined N lines to one (with a
space) and translated with the same engine through the text layer, as ``mtkit translate``
does: each joined line as one sentence (the default), each joined line as a text (segmented,
translated sentence by sentence, sentences the segmenter merged cut again, rebuilt:
``--split-sentences``), and the joined lines as the paragraphs of one HTML document (each a
``<p>`` whose second word is in ``<b>``: ``--format html``, the tags carried by the word
alignments). Each output is scored against the German reference joined the same way
(sacreBLEU, 13a, as ``mtkit evaluate``; the HTML output's paragraphs as their text), and its
words are counted against the reference's and against the sentence-by-sentence translation of
the unjoined test set, joined afterwards (the ceiling, "alone"). Throughput is given as a ratio
to "alone" (the same sentences, one per line: plain sentence-per-line translation), and at
the end, for one join, as the median of interleaved rounds (timings on a shared 2-core machine
vary by 20 % from run to run; the rounds are what to quote). A last
row translates the unjoined test set without the spans layer (``--no-spans``), to show what
masking costs or changes. Outputs are written to ``--out`` so that
``mtkit evaluate -i OUT/join4.split.de -r OUT/join4.ref.de`` gives the same figures.

    .venv/bin/python benchmarks/bench_text.py CKPT [--joins 1,2,4,8] [--threads 1] [--out DIR]
        [--throughput-join 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import html
import time
from pathlib import Path

import lxml.html
import sacrebleu
from machine import print_machine
from multi30k import DEMO_CHECKPOINT, existing, read_text

from mtkit.config import TranslateConfig
from mtkit.engines import load_engine
from mtkit.engines.base import Engine
from mtkit.text import TextOptions, translate_texts


def joined(lines: list[str], n: int) -> list[str]:
    return [" ".join(lines[i : i + n]) for i in range(0, len(lines), n)]


def words(lines: list[str]) -> int:
    return sum(len(line.split()) for line in lines)


def timed(engine: Engine, lines: list[str], options: TextOptions) -> tuple[list[str], float]:
    start = time.perf_counter()
    out = [t.text for t in translate_texts(engine, lines, options)]
    return out, time.perf_counter() - start


def document(lines: list[str]) -> str:
    """The lines as the paragraphs of an HTML fragment, each with its second word in bold."""
    paragraphs = []
    for line in lines:
        first, _, rest = html.escape(line, quote=False).partition(" ")
        second, _, rest = rest.partition(" ")
        paragraphs.append(f"<p>{first} <b>{second}</b> {rest}</p>\n")
    return "".join(paragraphs)


def paragraphs(text: str) -> list[str]:
    """The text of each ``<p>`` of a translated document, whitespace as one space."""
    root = lxml.html.fragment_fromstring(text, create_parent="div")
    return [" ".join(p.text_content().split()) for p in root.iter("p")]


def timed_html(engine: Engine, lines: list[str]) -> tuple[list[str], float]:
    start = time.perf_counter()
    (out,) = translate_texts(engine, [document(lines)], TextOptions(format="html"))
    seconds = time.perf_counter() - start
    found = paragraphs(out.text)
    if len(found) != len(lines) or out.text.count("<b>") != len(lines):
        raise SystemExit(f"the HTML output lost paragraphs or tags: {len(found)} of {len(lines)}")
    return found, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", nargs="?", default=str(DEMO_CHECKPOINT))
    parser.add_argument("--joins", default="1,2,4,8")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(".bench/text"))
    parser.add_argument("--throughput-join", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    existing(args.checkpoint, "make demo")
    args.out.mkdir(parents=True, exist_ok=True)
    print_machine()
    src, ref = read_text("test_2016_flickr", "en"), read_text("test_2016_flickr", "de")
    config = TranslateConfig.from_flat(
        {"threads": args.threads, "device": "cpu", "beam": args.beam}
    )
    engine = load_engine([args.checkpoint], config)
    plain = TextOptions(split=False)
    alone, seconds = timed(engine, src, plain)
    print(f"sentence by sentence: {len(src)} lines in {seconds:.1f}s")
    print("join  mode       lines  BLEU   words/ref  words/alone  seconds  speed/alone")
    for n in [int(x) for x in args.joins.split(",")]:
        refs, ceiling = joined(ref, n), joined(alone, n)
        (args.out / f"join{n}.ref.de").write_text("".join(r + "\n" for r in refs), "utf-8")
        rows = [("alone", ceiling, seconds)]
        for mode, options in (("as-is", plain), ("split", TextOptions())):
            rows.append((mode, *timed(engine, joined(src, n), options)))
        rows.append(("html", *timed_html(engine, joined(src, n))))
        for mode, out, took in rows:
            (args.out / f"join{n}.{mode}.de").write_text("".join(o + "\n" for o in out), "utf-8")
            print(row(n, mode, out, refs, ceiling, took, seconds), flush=True)
    raw, took = timed(engine, src, TextOptions(split=False, spans=False))
    print(row(1, "alone", alone, ref, alone, seconds, seconds))
    print(row(1, "no-spans", raw, ref, alone, took, seconds))
    changed = sum(a != b for a, b in zip(alone, raw, strict=True))
    print(f"lines whose translation the spans layer changes: {changed} of {len(src)}")
    throughput(engine, src, args.throughput_join, args.rounds)


def throughput(engine: Engine, src: list[str], n: int, rounds: int) -> None:
    """Seconds of each mode over ``rounds`` interleaved rounds (the median), as a ratio to
    plain sentence-per-line translation of the same sentences."""
    lines = joined(src, n)
    modes = {
        "alone": lambda: timed(engine, src, TextOptions(split=False))[1],
        "no-spans": lambda: timed(engine, src, TextOptions(split=False, spans=False))[1],
        "split": lambda: timed(engine, lines, TextOptions())[1],
        "html": lambda: timed_html(engine, lines)[1],
    }
    seconds: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(rounds):
        for mode, run in modes.items():
            seconds[mode].append(run())
    median = {mode: sorted(times)[len(times) // 2] for mode, times in seconds.items()}
    print(f"\nthroughput, join {n}, median of {rounds} interleaved rounds:")
    for mode, took in median.items():
        rounds_text = " ".join(f"{t:.1f}" for t in seconds[mode])
        print(f"  {mode:<9} {took:6.1f} s  ({rounds_text})  {median['alone'] / took:5.2f}x")


def row(
    n: int, mode: str, out: list[str], refs: list[str], ceiling: list[str], took: float, base: float
) -> str:
    bleu = sacrebleu.corpus_bleu(out, [refs]).score
    return (
        f"{n:>4}  {mode:<9} {len(out):>6}  {bleu:5.1f}  {words(out) / words(refs):9.1%}  "
        f"{words(out) / words(ceiling):11.1%}  {took:7.1f}  {base / took:10.2f}x"
    )


if __name__ == "__main__":
    main()
