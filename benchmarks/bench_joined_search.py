"""The ceiling of the server's decoding thread: one joined beam search stepped in this thread,
without client threads or HTTP, against offline batched translation.

Three figures, each from the same process (the machine's speed moves between processes):

- offline: ``engine.translate`` of the 1,000 test_2016_flickr captions (length-sorted batches);
- fresh batches of N random captions, decoded start to end as one search (no joins): the first
  ten steps' milliseconds (rows N x beam) and the whole decode's sentences/s: what batch size
  alone does to the rate;
- the steady state of step-level batching: ``--live`` captions decoding, each replaced by the
  next as it finishes, rows taken in every ``JOIN_EVERY`` steps as the scheduler does: sentences/s,
  milliseconds a step and a join, and the joins' share of the time.

Set against ``bench_scheduler.py`` (the same search on the scheduler's thread, with client
threads) and ``bench_serve.py --mixed`` (HTTP), the differences are what the threads and the
server cost.

    MTKIT_COMPILED_DIR=.bench/compiled .venv/bin/python benchmarks/bench_joined_search.py CKPT \
        [--live 32] [--sizes 8,36,72,144,288] [--threads 2] [--dtype fast] [--compile auto]
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from machine import print_machine
from multi30k import read_text

from mtkit.config import TranslateConfig
from mtkit.decoding.batching import pad_batch
from mtkit.decoding.scheduler import JOIN_EVERY
from mtkit.decoding.search import start_search


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--live", type=int, default=32, help="captions decoding at once")
    parser.add_argument("--sizes", default="8,36,72,144,288", help="fresh batch sizes")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", default="fast")
    parser.add_argument("--compile", default="auto")
    parser.add_argument("--beam", type=int, default=5)
    args = parser.parse_args()
    print_machine()
    torch.set_num_threads(args.threads)
    from mtkit.engines import load_engine

    flat = {"beam": args.beam, "dtype": args.dtype, "compile": args.compile}
    engine = load_engine([args.checkpoint], TranslateConfig.from_flat(flat))
    lines = read_text("test_2016_flickr", "en")
    search, ids, rng = engine.config.search, engine.src_tokenizer.specials, random.Random(0)

    def sources(sample: list[str]) -> torch.Tensor:
        rows = engine.src_tokenizer.encode(sample)
        return pad_batch([r + [ids.eos] for r in rows], engine.device, ids.pad)

    def started(sample: list[str]):
        return start_search(engine.models, sources(sample), search, None, None, None, True, True)

    engine.translate(lines[:32])
    start = time.perf_counter()
    engine.translate(lines)
    print(f"offline: {len(lines) / (time.perf_counter() - start):.1f} sentences/s\n")
    engine.schedule(2048)  # (after offline, as a server: the joined graph and the encoder's)
    print(
        "| fresh batch | rows | first 10 steps (ms a step) | sentences/s |\n|---:|---:|---:|---:|"
    )
    with torch.inference_mode():
        for n, timed in [(n, t) for n in map(int, args.sizes.split(",")) for t in (False, True)]:
            begun = time.perf_counter()  # (each size twice: a warm-up, then timed)
            running, steps, first = started(rng.sample(lines, n)), 0, 0.0
            stepped = time.perf_counter()
            while not running.done:
                running.step()
                running.finished()
                steps += 1
                first = time.perf_counter() - stepped if steps == 10 else first
            if timed:
                rate = n / (time.perf_counter() - begun)
                print(f"| {n} | {n * args.beam} | {first * 100:.1f} | {rate:.1f} |")
        todo = list(lines)
        rng.shuffle(todo)
        begun = time.perf_counter()
        running = started([todo.pop() for _ in range(args.live)])
        done = waiting = steps = joins = 0
        joining = stepping = 0.0
        while todo or not running.done:
            if waiting and todo and (steps % JOIN_EVERY == 0 or running.done):
                t = time.perf_counter()
                running.join(sources([todo.pop() for _ in range(min(waiting, len(todo)))]))
                joining, waiting, joins = joining + time.perf_counter() - t, 0, joins + 1
            t = time.perf_counter()
            running.step()
            left = len(running.finished())
            stepping, steps = stepping + time.perf_counter() - t, steps + 1
            done, waiting = done + left, waiting + left
        wall = time.perf_counter() - begun
    print(
        f"\nsteady state, {args.live} live: {done / wall:.1f} sentences/s, {steps} steps of "
        f"{stepping / steps * 1000:.2f} ms, {joins} joins of "
        f"{joining / max(joins, 1) * 1000:.2f} ms, {joining / wall:.0%} of the time"
    )


if __name__ == "__main__":
    main()
