"""Speculative decoding (``--draft``) against the teacher's own greedy decoding, on CPU.

Translates the first ``--limit`` lines of Multi30k test_2016_flickr (en) with greedy decoding
of the teacher (``CKPT``; several: an ensemble of them; ``--ensemble N``: the checkpoints N
times, a stand-in for a costlier teacher), and with each ``--draft-tokens`` k of the
``--draft`` model proposing, and prints:

- single sentences (the interactive case, a server with one client): one line per call,
  milliseconds per sentence and tokens/s;
- batches (the pipeline: length-sorted batches of ``--max-tokens`` source tokens): tokens/s;
- the speed-up over the teacher's greedy, the draft's acceptance rate (accepted / proposed
  tokens, each row its own), the tokens a sentence gains per pass of the teacher, and the
  share of lines whose output equals the teacher's greedy output.

Engines are loaded once; the rows run in ``--rounds`` interleaved rounds (teacher, then each k,
then again; with ``--draft-quantize`` and ``--draft-shortlist``, each k for each kind of draft)
and each figure is the median over rounds, because the machine may be shared.

    .venv/bin/python benchmarks/bench_speculative.py CKPT --draft DRAFT [--limit 200] \\
        [--tokens 2 4 6] [--ensemble 2] [--threads 1] [--rounds 3] \\
        [--draft-quantize '' int8 bf16] [--draft-shortlist SHORTLIST] [--draft-confidence 0 0.5] \\
        [--compile] [--cpu-matmul onednn default]

With ``--compile`` every row (but the shortlisted drafts') runs also with teacher and draft
compiled (``--compile``), and with ``--cpu-matmul onednn default`` with each CPU matmul (for
one sentence, few rows a call, ``default`` can be the faster); where there are several greedy
rows, each draft row gives its speed-up over the first (eager, the first matmul) and over the
fastest greedy row, the teacher at its best setting.

``--draft`` takes several checkpoints (e.g. the student and the same student fine-tuned on the
teacher's greedy output, benchmarks/README.md): their rows, D1, D2, ..., run in the
same rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import torch
from machine import print_machine
from multi30k import DEMO_CHECKPOINT, RECIPE_STUDENT, existing, read_text

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.decoding.speculative import DraftStats
from mtkit.engines import load_engine
from mtkit.engines.base import Engine, best_texts


def timed(engine: Engine, lines: list[str], single: bool) -> tuple[float, list[str], int]:
    """Seconds, the translations and their target tokens (EOS included), one line per call
    (``single``) or the whole list at once (batched by the engine)."""
    start = time.perf_counter()
    if single:
        found = [hyps for line in lines for hyps in engine.translate([line])]
    else:
        found = engine.translate(lines)
    seconds = time.perf_counter() - start
    return seconds, best_texts(found), sum(h[0].tokens + 1 for h in found if h)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "checkpoint",
        nargs="*",
        default=[str(DEMO_CHECKPOINT)],
        help="the teacher (several: an ensemble of them)",
    )
    parser.add_argument(
        "--draft",
        nargs="+",
        default=[str(RECIPE_STUDENT)],
        help="draft checkpoints (several: rows D1, D2, ...)",
    )
    parser.add_argument("--tokens", type=int, nargs="+", default=[2, 4, 6])
    parser.add_argument("--ensemble", type=int, default=1, help="the teacher N times")
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--modes", nargs="+", default=["single", "batch"])
    parser.add_argument(
        "--draft-quantize",
        nargs="+",
        default=[""],
        choices=["", "int8", "bf16"],
        help="the draft precisions to compare ('' as the teacher; bf16: --draft-dtype bf16)",
    )
    parser.add_argument(
        "--draft-confidence",
        type=float,
        nargs="+",
        default=[0.0],
        help="confidence thresholds to compare (0: always k)",
    )
    parser.add_argument(
        "--draft-shortlist", default="", help="each k also with the draft within this shortlist"
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="every row also with --compile (teacher and draft compiled)",
    )
    parser.add_argument(
        "--cpu-matmul",
        nargs="+",
        default=["onednn"],
        choices=["onednn", "default"],
        help="every row with each of these --cpu-matmul",
    )
    args = parser.parse_args()
    for checkpoint in args.checkpoint:
        existing(checkpoint, "make demo")
    for draft in args.draft:
        existing(draft, "make -C recipes/multi30k student")
    torch.set_num_threads(args.threads)
    print_machine()
    lines = read_text("test_2016_flickr", "en")[: args.limit]
    base = TranslateConfig(
        search=SearchConfig(beam=1), device="cpu", threads=args.threads, max_tokens=args.max_tokens
    )
    models = args.checkpoint * args.ensemble
    engines = {}
    kinds = [(m, c) for m in args.cpu_matmul for c in ((False, True) if args.compile else (False,))]
    for matmul, compiled in kinds:
        run = replace(base, compile=compiled, cpu_matmul=matmul)
        mark = (" compiled" if compiled else "") + ("" if matmul == "onednn" else f" {matmul} mm")
        engines[f"greedy{mark}"] = load_engine(models, run)
        for d, draft in enumerate(args.draft):
            label = f"D{d + 1} " if len(args.draft) > 1 else ""
            for quantize in args.draft_quantize:
                for sl in ("", args.draft_shortlist) if args.draft_shortlist else ("",):
                    if sl and compiled:
                        continue  # --compile refuses --draft-shortlist
                    for conf in args.draft_confidence:
                        tail = (f" {quantize}" if quantize else "") + (" +SL" if sl else "")
                        precision = (
                            {"draft_dtype": "bf16"}
                            if quantize == "bf16"
                            else {"draft_quantize": quantize}
                        )
                        tail += f" c={conf:g}" if conf else ""
                        for k in args.tokens:
                            engines[f"{label}draft k={k}{tail}{mark}"] = load_engine(
                                models,
                                replace(
                                    run,
                                    draft=draft,
                                    draft_tokens=k,
                                    draft_shortlist=sl,
                                    draft_confidence=conf,
                                    **precision,
                                ),
                            )
    names = list(engines)
    for engine in engines.values():  # warm-up: batched and one a call (a compiled draft
        engine.translate(lines[:8])  # builds its graph of several positions on first use)
        for line in lines[:16]:
            engine.translate([line])
    teacher = f"teacher: {' + '.join(args.checkpoint)}"
    teacher += f" x{args.ensemble}" if args.ensemble > 1 else ""
    drafts = "".join(
        f"\n{f'D{d + 1}: ' if len(args.draft) > 1 else 'draft: '}{draft}"
        for d, draft in enumerate(args.draft)
    )
    print(
        f"{teacher}{drafts}\n{len(lines)} lines, {args.threads} thread(s), "
        f"{args.rounds} interleaved rounds (medians)"
    )
    for mode in args.modes:
        seconds: dict[str, list[float]] = {name: [] for name in names}
        outputs: dict[str, list[str]] = {}
        tokens: dict[str, int] = {}
        stats: dict[str, DraftStats] = {}
        for _ in range(args.rounds):
            for name in names:
                engine = engines[name]
                if engine.draft is not None:
                    engine.draft.stats = stats.setdefault(name, DraftStats())
                took, outputs[name], tokens[name] = timed(engine, lines, mode == "single")
                seconds[name].append(took)
        print(f"\n{mode} ({'one line per call' if mode == 'single' else 'batched'}):")
        base_s = statistics.median(seconds[names[0]])
        greedy = {n: statistics.median(seconds[n]) for n in names if n.startswith("greedy")}
        best = min(greedy, key=greedy.__getitem__)  # the teacher at its best setting
        for name in names:
            s = statistics.median(seconds[name])
            same = sum(a == b for a, b in zip(outputs[name], outputs[names[0]], strict=True))
            extra = ""
            if name in stats:
                st = stats[name]
                extra = f"  acceptance {st.acceptance:.2f}  tokens/pass {st.tokens_per_pass:.2f}"
            if len(greedy) > 1 and name not in greedy:
                extra += f"  x{greedy[best] / s:.2f} {best}"
            print(
                f"  {name:<44} {1000 * s / len(lines):7.2f} ms/sent  {tokens[name] / s:7.0f} "
                f"tok/s  x{base_s / s:.2f}  identical {same}/{len(lines)}{extra}"
            )


if __name__ == "__main__":
    main()
