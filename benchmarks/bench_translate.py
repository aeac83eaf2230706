"""Decoding speed of `mtkit translate` on CPU: batching, beam vs greedy, int8, and the KV cache.

Translates Multi30k test_2016_flickr (en, 1,000 lines) with one checkpoint and prints sentences/s
and target tokens/s (EOS included) for:

- batched beam 5 (the pipeline: length-sorted batches of ``--max-tokens`` source tokens) against
  one sentence at a time;
- greedy against beam 5;
- fp32 against dynamic int8 (``--quantize int8``, the tied output projection included), with the
  BLEU of each against the references (a trained checkpoint) and of int8 against fp32;
- cached incremental decoding (``decode_step``) against a reference decoder in this file that
  re-runs ``model.decode`` over the whole prefix at every step (same beam bookkeeping).

Without a checkpoint, a random transformer-small (d 256, ffn 1024, 4 heads, 3+3 layers, joint 8k
spm trained on Multi30k train; cached under .bench/translate/) is built, and every output is
forced to ``--random-len`` tokens (min_len = max_len), so all rows compare equal work; BLEU is
then meaningless. Slow rows run on the first ``--slow-limit`` lines. Timings cover tokenization,
search and detokenization, after one warm-up batch.

    .venv/bin/python benchmarks/bench_translate.py [CKPT] [--threads T] [--limit N]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import torch
from multi30k import bleu, random_checkpoint, read_text

from mtkit.config import TranslateConfig
from mtkit.decoding import search as search_module
from mtkit.decoding.ensemble import Ensemble
from mtkit.engines import load_engine
from mtkit.engines.base import Engine
from mtkit.model.transformer import EncoderOut

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".bench" / "translate"


# ---------------------------------------------------------------------------------------------
# The uncached reference: every step re-decodes the whole prefix


def select_rows(enc: EncoderOut, index: torch.Tensor) -> EncoderOut:
    keep = None if enc.src_keep is None else enc.src_keep.index_select(0, index)
    return EncoderOut(enc.memory.index_select(0, index), keep)


class UncachedEnsemble(Ensemble):
    """Drop-in for the search's Ensemble: ``step`` runs ``model.decode`` over all tokens so far
    (one model only), as decoders without a KV cache do."""

    def start(self, src: torch.Tensor, copies: int, max_len: int, shared: bool = False) -> None:
        """Encode; each row holds its own copy of its sentence's encoder output (``shared``
        or not: nothing is cached per source here)."""
        index = torch.arange(src.shape[0]).repeat_interleave(copies)
        self.enc = select_rows(self.models[0].encode(src), index)
        self.prefix = torch.empty((len(index), 0), dtype=torch.long)  # BOS comes with step 0

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        self.prefix = torch.cat([self.prefix, tokens[:, None]], dim=1)  # (R, t + 1)
        return self.models[0].decode(self.prefix, self.enc)[:, -1].float().log_softmax(-1)

    def reorder(self, rows: torch.Tensor, sources: torch.Tensor | None) -> None:
        """Keep ``rows``; the encoder output, held once per row here, moves with its rows
        whenever they change sentences (``sources`` given), as with Ensemble.reorder."""
        self.prefix = self.prefix.index_select(0, rows)
        if sources is not None:
            self.enc = select_rows(self.enc, rows)


# ---------------------------------------------------------------------------------------------
# Measuring


@dataclasses.dataclass
class Row:
    name: str
    sentences: int
    tokens: int
    seconds: float
    outputs: list[str]

    @property
    def sent_s(self) -> float:
        return self.sentences / self.seconds

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds


def run_lines(tr: Engine, lines: list[str]) -> tuple[list[str], int]:
    """Translations of ``lines`` and the number of target tokens generated (EOS included)."""
    results = tr.translate(lines)
    texts = [hyps[0].text if hyps else "" for hyps in results]
    return texts, sum(hyps[0].tokens + 1 for hyps in results if hyps)


def measure(name: str, tr: Engine, lines: list[str], one_by_one: bool = False) -> Row:
    run_lines(tr, lines[:8])  # warm-up
    start = time.perf_counter()
    if one_by_one:
        results = [run_lines(tr, [line]) for line in lines]
        outputs, tokens = [r[0][0] for r in results], sum(r[1] for r in results)
    else:
        outputs, tokens = run_lines(tr, lines)
    seconds = time.perf_counter() - start
    row = Row(name, len(lines), tokens, seconds, outputs)
    print(f"  {name:<28} {row.sent_s:8.1f} sent/s {row.tok_s:8.0f} tok/s  ({seconds:.1f}s)")
    return row


def measure_uncached(name: str, tr: Engine, lines: list[str]) -> Row:
    original = search_module.Ensemble
    search_module.Ensemble = UncachedEnsemble  # type: ignore[misc]
    try:
        return measure(name, tr, lines)
    finally:
        search_module.Ensemble = original  # type: ignore[misc]


def report(rows: dict[str, Row], refs: list[str], random_model: bool) -> str:
    out = [f"{'setting':<30} {'lines':>5} {'sent/s':>8} {'tok/s':>8}"]
    out += [f"{r.name:<30} {r.sentences:5d} {r.sent_s:8.1f} {r.tok_s:8.0f}" for r in rows.values()]
    pairs = [
        ("batched beam5", "one-by-one beam5"),
        ("greedy", "batched beam5"),
        ("int8 beam5", "batched beam5"),
        ("batched beam5", "uncached beam5"),
    ]
    out.append("")
    for a, b in pairs:
        if a in rows and b in rows:
            ratio = rows[a].tok_s / rows[b].tok_s
            out.append(f"{a} / {b}: {ratio:.2f}x target tok/s")
    fp32, int8 = rows["batched beam5"], rows.get("int8 beam5")
    if "uncached beam5" in rows:
        slow = rows["uncached beam5"].outputs
        same = sum(a == b for a, b in zip(slow, fp32.outputs, strict=False))
        out.append(f"uncached outputs identical to cached: {same}/{len(slow)}")
    if int8 is not None:
        agree = bleu(int8.outputs, fp32.outputs)
        out.append(f"int8 vs fp32 output agreement: BLEU {agree:.1f}")
        if not random_model:
            n = len(fp32.outputs)
            out.append(
                f"BLEU vs reference: fp32 {bleu(fp32.outputs, refs[:n]):.2f}, "
                f"int8 {bleu(int8.outputs, refs[:n]):.2f}"
            )
    if random_model:
        out.append("random model, outputs forced to equal length: BLEU is meaningless")
    return "\n".join(out)


def main(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
    random_model = args.checkpoint is None
    ckpt = str(args.checkpoint or random_checkpoint(WORK))
    lines = read_text("test_2016_flickr", "en")[: args.limit]
    refs = read_text("test_2016_flickr", "de")
    slow = lines[: args.slow_limit]
    forced = dict(max_len_a=0.0, max_len_b=args.random_len, min_len=args.random_len)
    base = TranslateConfig.from_flat(
        dict(
            beam=5,
            device="cpu",
            max_tokens=args.max_tokens,
            threads=args.threads,
            **(forced if random_model else {}),
        )
    )
    fp32 = load_engine([ckpt], base)
    greedy = load_engine([ckpt], dataclasses.replace(base, search=base.search.replace(beam=1)))
    int8 = load_engine([ckpt], dataclasses.replace(base, quantize="int8"))
    print(f"threads {torch.get_num_threads()}, {len(lines)} lines ({len(slow)} for slow rows)")
    plan: list[tuple[str, Callable[[], Row]]] = [
        ("batched beam5", lambda: measure("batched beam5", fp32, lines)),
        ("greedy", lambda: measure("greedy", greedy, lines)),
        ("int8 beam5", lambda: measure("int8 beam5", int8, lines)),
        ("one-by-one beam5", lambda: measure("one-by-one beam5", fp32, slow, one_by_one=True)),
        ("uncached beam5", lambda: measure_uncached("uncached beam5", fp32, slow)),
    ]
    rows = {name: run() for name, run in plan if name not in args.skip}
    print()
    print(report(rows, refs, random_model))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", nargs="?", type=Path, help="default: a random model")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--limit", type=int, default=1000, help="lines of the test set")
    parser.add_argument("--slow-limit", type=int, default=200, help="lines for the slow rows")
    parser.add_argument("--max-tokens", type=int, default=4096, help="source tokens per batch")
    parser.add_argument("--random-len", type=int, default=20, help="forced output length")
    parser.add_argument("--skip", nargs="*", default=[], help="rows to leave out")
    return parser.parse_args()


if __name__ == "__main__":
    main(parse_args())
