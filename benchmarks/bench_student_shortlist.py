"""What the lexical shortlist alone buys: the student with and without it, by shortlist size
and batch size (issue 30's ">= 1.3x at <= 0.2 BLEU loss").

The recipe's student (`make -C recipes/multi30k student`) translates Multi30k test_2016_flickr
(en, 1,000 lines) greedily at ``--threads``, through `mtkit translate`'s engines: CTranslate2
int8 (exported once per shortlist, the shortlist as its vocabulary map), and with ``--native``
also the native engine in fp32 and int8 (``--shortlist``). Shortlists: IBM model 1 on the
student's training data, learnt once at the largest size and cut to each ``--sizes`` entry
(TOP_K/FREQUENT; what `mtkit shortlist build` writes at that size). Each shortlist size runs
at each ``--max-tokens`` batch size, beside the same engine without a shortlist at that batch
size: a vocabulary map restricts the output layer to the union of a batch's candidates, so
smaller batches have smaller unions, and also batch less well.

Columns: sentences/s (medians of ``--rounds`` interleaved rounds), the ratio to the same
engine without a shortlist at the same batch size ("x same batch": the shortlist alone) and to
that engine's fastest batch size without one ("x best plain": each at its best setting), the
mean size of a batch's union (target pieces the output layer keeps, of the vocabulary), BLEU
on the test set and on val (1,014 lines).

    .venv/bin/python benchmarks/bench_student_shortlist.py [--sizes 50/100,20/50] \\
        [--max-tokens 4096,1024,512] [--rounds 5] [--threads 1] [--native]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from bench_students import MADE_BY, STUDENT_DATA, WORK, build_shortlist
from machine import machine_lines
from multi30k import RECIPE_STUDENT, bleu, existing, read_text

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.data.binarized import load_tokenizers
from mtkit.data.shortlist import Shortlist, read_shortlist
from mtkit.engines import load_engine
from mtkit.engines.base import Engine, best_texts, source_batches
from mtkit.export.ct2 import export_ct2


@dataclass
class Row:
    engine: str  # "ct2 int8", "native fp32", "native int8"
    size: str  # TOP_K/FREQUENT, or "" (no shortlist)
    max_tokens: int
    loaded: Engine
    rates: list[float] = field(default_factory=list)
    bleu: float = 0.0
    val_bleu: float = 0.0

    @property
    def rate(self) -> float:
        return statistics.median(self.rates)


def shortlists(data: Path, sizes: list[tuple[int, int]]) -> dict[str, Path]:
    """Each size's shortlist file: the largest learnt once, the others cut from it."""
    top, freq = max(k for k, _ in sizes), max(f for _, f in sizes)
    largest = read_shortlist(build_shortlist(data, top, freq))
    out = {}
    for k, f in sizes:
        path = WORK / f"shortlist-{k}-{f}-cut-{largest.src_sha256[:12]}.json.gz"
        if not path.is_file():
            with path.open("wb") as handle:
                largest.cut(k, f).write(handle)
        out[f"{k}/{f}"] = path
    return out


def rows_for(args: argparse.Namespace, files: dict[str, Path]) -> list[Row]:
    greedy = TranslateConfig(search=SearchConfig(beam=1), device="cpu", threads=args.threads)
    engines: dict[str, tuple[str, dict]] = {}
    for size, path in {"": None, **files}.items():
        tail = f"-{size.replace('/', '-')}" if size else ""
        out = export_ct2(
            args.student, WORK / f"ct2-int8-sl{tail}", "int8", force=True, shortlist=path or ""
        )
        engines[f"ct2 int8|{size}"] = (str(out), {"engine": "ctranslate2"})
        if args.native:
            for quant in ("fp32", "int8"):
                extra = {"shortlist": str(path or "")}
                if quant == "int8":
                    extra["quantize"] = "int8"
                engines[f"native {quant}|{size}"] = (args.student, extra)
    rows = []
    for key, (model, extra) in engines.items():
        name, size = key.split("|")
        for max_tokens in args.max_tokens:
            config = replace(greedy, max_tokens=max_tokens, **extra)
            rows.append(Row(name, size, max_tokens, load_engine([model], config)))
    return rows


def union_sizes(shortlist: Shortlist, ids: list[list[int]], max_tokens: int) -> float:
    """The mean union of the batches the engines make of ``ids`` at ``max_tokens``."""
    sizes = [
        len(shortlist.union([ids[i] for i in batch])) for batch in source_batches(ids, max_tokens)
    ]
    return float(np.mean(sizes))


def main(args: argparse.Namespace) -> None:
    machine = machine_lines()
    print("\n".join(machine), flush=True)
    torch.set_num_threads(args.threads)
    sizes = [tuple(map(int, s.split("/"))) for s in args.sizes.split(",")]
    files = shortlists(args.data, sizes)
    rows = rows_for(args, files)
    test, refs = read_text("test_2016_flickr", "en"), read_text("test_2016_flickr", "de")
    val, val_refs = read_text("val", "en"), read_text("val", "de")
    for row in rows:
        row.loaded.translate(test[:32])  # warm-up
    for r in range(args.rounds):
        print(f"round {r + 1} of {args.rounds}", flush=True)
        for row in rows:
            start = time.perf_counter()
            found = row.loaded.translate(test)
            row.rates.append(len(test) / (time.perf_counter() - start))
            if r == 0:
                row.bleu = bleu(best_texts(found), refs)
    for row in rows:
        row.val_bleu = bleu(best_texts(row.loaded.translate(val)), val_refs)
    src, _ = load_tokenizers(args.data)
    ids = src.encode(test)
    read = {size: read_shortlist(path) for size, path in files.items()}
    vocab = next(iter(read.values())).tgt_vocab_size
    print(
        f"\n{len(test)} lines, greedy, {args.threads} thread(s), medians of {args.rounds} "
        f"interleaved rounds; target vocabulary {vocab}\n"
    )
    print(
        "| engine | shortlist | max tokens | sent/s | x same batch | x best plain "
        "| mean union | BLEU | val BLEU |"
    )
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|")
    for row in rows:
        plain = [p for p in rows if p.engine == row.engine and not p.size]
        same = next(p for p in plain if p.max_tokens == row.max_tokens)
        best = max(p.rate for p in plain)
        union = f"{union_sizes(read[row.size], ids, row.max_tokens):,.0f}" if row.size else "-"
        print(
            f"| {row.engine} | {row.size or 'none'} | {row.max_tokens} | {row.rate:.1f} "
            f"| {row.rate / same.rate:.2f}x | {row.rate / best:.2f}x | {union} "
            f"| {row.bleu:.2f} | {row.val_bleu:.2f} |"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--student", default=str(RECIPE_STUDENT), help="the student checkpoint")
    parser.add_argument(
        "--data", type=Path, default=STUDENT_DATA, help="the student's prepared data: its shortlist"
    )
    parser.add_argument(
        "--sizes",
        default="50/100,20/100,20/50,10/50",
        help="shortlist sizes TOP_K/FREQUENT, comma-separated",
    )
    parser.add_argument(
        "--max-tokens",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[4096, 1024, 512],
        help="batch sizes, comma-separated",
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--threads", type=int, default=1, help="torch / CTranslate2 threads")
    parser.add_argument("--native", action="store_true", help="also the native engine")
    args = parser.parse_args()
    existing(args.student, MADE_BY)
    existing(args.data, MADE_BY)
    return args


if __name__ == "__main__":
    main(parse_args())
