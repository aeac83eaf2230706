"""The decoding thread of ``mtkit serve`` without HTTP: single-sentence clients and a long text,
as threads of one process on the engine's scheduler (``engine.schedule``), each translating
through the text layer as a server request does.

What ``bench_serve.py --mixed`` measures, less the HTTP side (uvicorn, FastAPI, the event loop):
so that a change to the scheduler or the search can be weighed in a minute, and the share of the
server's time that HTTP takes read off beside ``bench_serve.py``'s figures. Prints the offline
batched rate (``engine.translate`` of all the lines, before the scheduler), the clients'
sentences/s and latency percentiles, the long text's time alone and under the load, and all the
work (clients' sentences and the long text's) against offline.

    MTKIT_COMPILED_DIR=.bench/compiled .venv/bin/python benchmarks/bench_scheduler.py CKPT \
        [--clients 32] [--sentences 1000] [--threads 2] [--dtype fast] [--compile auto]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import threading
import time

import torch
from machine import print_machine
from multi30k import read_text

from mtkit.config import TranslateConfig
from mtkit.decoding.scheduler import JOIN_EVERY
from mtkit.engines import load_engine
from mtkit.text import translate_text


def long_text(pool: list[str], words: int) -> tuple[str, int]:
    """The first captions of ``pool`` run together to ``words`` words, and how many."""
    taken: list[str] = []
    while sum(len(s.split()) for s in taken) < words and len(taken) < len(pool):
        taken.append(pool[len(taken)])
    return " ".join(taken), len(taken)


def clients(engine, lines: list[str], count: int, text: str, delay: float) -> dict:
    """``count`` threads translating ``lines`` one at a time, and one thread translating
    ``text`` after ``delay`` seconds; latencies, the long text's span, the wall time."""
    todo, lock = list(reversed(lines)), threading.Lock()
    latencies: list[float] = []
    span: list[float] = []

    def single() -> None:
        while True:
            with lock:
                if not todo:
                    return
                line = todo.pop()
            start = time.perf_counter()
            translate_text(engine, [line], "en")
            latencies.append(time.perf_counter() - start)

    def long() -> None:
        time.sleep(delay)
        start = time.perf_counter()
        translate_text(engine, [text], "en")
        span.extend((start, time.perf_counter()))

    threads = [threading.Thread(target=single) for _ in range(count)]
    threads += [threading.Thread(target=long)] if text else []
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads[:count]:
        thread.join()
    end = time.perf_counter()
    for thread in threads[count:]:
        thread.join()
    return {"latencies": latencies, "start": start, "end": end, "span": span}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", default="fast")
    parser.add_argument("--compile", default="auto")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--long-words", type=int, default=3000)
    parser.add_argument("--max-tokens", type=int, default=2048, help="serve's --max-batch-tokens")
    parser.add_argument("--share-tokens", type=int, default=64, help="serve's --slice-tokens")
    parser.add_argument("--join-every", type=int, default=0, help="steps between intakes")
    parser.add_argument("--decoders", type=int, default=1, help="serve's --decoders")
    args = parser.parse_args()
    print_machine()
    torch.set_num_threads(args.threads)
    flat = {"beam": args.beam, "dtype": args.dtype, "compile": args.compile}
    engine = load_engine([args.checkpoint], TranslateConfig.from_flat(flat))
    lines = read_text("test_2016_flickr", "en")[: args.sentences]
    text, long_sentences = long_text(read_text("test_2016_flickr", "en"), args.long_words)
    engine.translate(lines[:32])
    start = time.perf_counter()
    engine.translate(lines)
    offline = len(lines) / (time.perf_counter() - start)
    scheduler = engine.schedule(args.max_tokens, args.share_tokens, args.decoders)
    if args.join_every and args.decoders == 1:  # (decoders: each process's own default)
        scheduler.join_every = args.join_every
    translate_text(engine, lines[:16], "en")  # the joining graph's first call
    start = time.perf_counter()
    translate_text(engine, [text], "en")
    alone = time.perf_counter() - start
    before = dataclasses.replace(engine.scheduler.stats)
    run = clients(engine, lines, args.clients, text, 1.0)
    stats = engine.scheduler.stats
    spent = {k: getattr(stats, k) - getattr(before, k) for k in ("idle", "starting", "stepping")}
    intakes = stats.intakes - before.intakes
    lat, wall = run["latencies"], run["end"] - run["start"]
    rate = len(lat) / wall
    a, b = run["span"]
    inside = max(0.0, min(b, run["end"]) - max(a, run["start"])) / (b - a)
    work = rate * (1 + inside * long_sentences / len(lat))
    p50, p95, p99 = (statistics.quantiles(lat, n=100)[q - 1] * 1000 for q in (50, 95, 99))
    print(
        f"model {args.checkpoint}; beam {args.beam}; --dtype {args.dtype} --compile "
        f"{args.compile} (compiled: {engine.compiled}); budget {args.max_tokens}, share "
        f"{args.share_tokens}, rows join every "
        f"{getattr(scheduler, 'join_every', JOIN_EVERY)} steps, "
        f"{args.decoders} decoding process(es)\n"
        f"offline batched: {offline:.1f} sentences/s; long text ({long_sentences} sentences) "
        f"alone {alone:.1f} s\n"
        f"| clients | sentences/s | vs offline | p50 ms | p95 ms | p99 ms | long text (s) "
        f"| all work vs offline | steps | most rows | idle (s) |\n"
        f"| {args.clients} | {rate:.1f} | {rate / offline:.2f}x | {p50:.0f} | {p95:.0f} "
        f"| {p99:.0f} | {b - a:.1f} | {work / offline:.2f}x | {stats.steps} "
        f"| {stats.most_rows} | {spent['idle']:.1f} |"
    )
    print(
        f"the decoding thread under the load: starting and joining rows {spent['starting']:.1f} "
        f"s in {intakes} intakes, steps {spent['stepping']:.1f} s, idle {spent['idle']:.1f} s"
    )
    engine.scheduler.close()


if __name__ == "__main__":
    main()
