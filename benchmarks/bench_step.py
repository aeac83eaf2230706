"""Where the milliseconds of a beam step go: linear layers, attention, cache, softmax, search.

Translates test_2016_flickr (en) with ``mtkit translate``'s native engine in batches of
``--batch`` length-sorted sentences (beam 5), with a stopwatch (``time.perf_counter``) around
each part of the work, and prints milliseconds per decoding step and the share of each part:

- encoder: ``model.encode`` of each batch (all its parts included);
- linear layers: every linear layer of the decoder steps (packed fp32/bf16, or int8);
- attention: ``scaled_dot_product_attention`` in the decoder steps;
- cache: writing each step's keys/values and reordering the caches after each beam step;
- decoder, other: the rest of ``decode_step`` (embedding, norms, residuals, reshapes, Python);
- log-softmax: the step's log-probabilities over the vocabulary (``Ensemble.step`` minus
  ``decode_step``);
- search: everything else in the loop (constraints, top-k, finished hypotheses, Python).

Without a checkpoint, bench_translate.py's random transformer-small decodes, every output
forced to ``--random-len`` tokens.

A stopwatch costs about 0.2 us per call, so the shares are honest where PyTorch's profiler (a
few microseconds per operator, on thousands of small operators per step) is not. Whole runs
without stopwatches give the tokens/s beside the table.

    .venv/bin/python benchmarks/bench_step.py [CKPT] [--dtypes fp32 bf16 int8] [--threads 1]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import torch.nn.functional as F
from machine import print_machine
from multi30k import random_checkpoint, read_text

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.decoding.ensemble import Ensemble
from mtkit.engines import load_engine
from mtkit.model.state import KeyValueCache

WORK = Path(__file__).resolve().parent.parent / ".bench" / "translate"  # bench_translate's model
PARTS = (
    "encoder",
    "linear layers",
    "attention",
    "cache",
    "decoder, other",
    "log-softmax",
    "search",
)


class Stopwatches:
    """Seconds per part, accumulated by wrapped callables; nested parts are subtracted later."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.on = False

    def wrap(self, name: str, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            if not self.on:
                return fn(*args, **kwargs)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.calls[name] += 1

        return timed


def instrument(engine, watch: Stopwatches) -> list[Callable[[], None]]:
    """Wrap the engine's model and the search's parts; returns the undo functions."""
    undo = []

    def patch(owner, attr: str, name: str) -> None:
        old = getattr(owner, attr)
        setattr(owner, attr, watch.wrap(name, old))
        undo.append(lambda: setattr(owner, attr, old))

    model = engine.models[0]
    for module in model.modules():
        if "Linear" in type(module).__name__:
            patch(module, "forward", "linear")
    patch(model, "encode", "encode")
    timed_encode = model.encode

    def encode(*args, **kwargs):  # the encoder's linear layers and attention are its own
        before = watch.seconds["linear"], watch.seconds["attention"]
        try:
            return timed_encode(*args, **kwargs)
        finally:
            watch.seconds["linear_in_encode"] += watch.seconds["linear"] - before[0]
            watch.seconds["attention_in_encode"] += watch.seconds["attention"] - before[1]

    model.encode = encode
    patch(model, "decode_step", "decode_step")
    patch(F, "scaled_dot_product_attention", "attention")
    patch(KeyValueCache, "append", "append")
    patch(Ensemble, "step", "ensemble_step")
    patch(Ensemble, "reorder", "ensemble_reorder")
    return undo


def parts(watch: Stopwatches, total: float) -> dict[str, float]:
    """Seconds per reported part (see the module docstring), from the raw stopwatches."""
    s = watch.seconds
    decode = s["decode_step"]
    linear = s["linear"] - s["linear_in_encode"]
    attention = s["attention"] - s["attention_in_encode"]
    return {
        "encoder": s["encode"],
        "linear layers": linear,
        "attention": attention,
        "cache": s["append"] + s["ensemble_reorder"],
        "decoder, other": decode - linear - attention - s["append"],
        "log-softmax": s["ensemble_step"] - decode,
        "search": total - s["encode"] - s["ensemble_step"] - s["ensemble_reorder"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", nargs="?", type=Path, help="default: a random model")
    p.add_argument("--dtypes", nargs="+", default=["fp32", "bf16", "int8"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--limit", type=int, default=500, help="first N test lines")
    p.add_argument("--random-len", type=int, default=16, help="forced output length (random)")
    opts = p.parse_args()
    print_machine()
    checkpoint = opts.checkpoint or random_checkpoint(WORK)
    search = SearchConfig(beam=5)
    if opts.checkpoint is None:
        n = opts.random_len
        search = SearchConfig(beam=5, min_len=n, max_len_a=0, max_len_b=n)
    lines = sorted(read_text("test_2016_flickr", "en")[: opts.limit], key=len)
    batches = [lines[i : i + opts.batch] for i in range(0, len(lines), opts.batch)]
    print(
        f"{len(lines)} lines of test_2016_flickr in batches of {opts.batch}, beam 5, "
        f"{opts.threads} thread(s); ms per decoding step (share)"
    )
    for dtype in opts.dtypes:
        quantize = "int8" if dtype == "int8" else ""
        cfg = TranslateConfig(
            search,
            device="cpu",
            threads=opts.threads,
            max_tokens=10**9,
            dtype="fp32" if quantize else dtype,
            quantize=quantize,
        )
        engine = load_engine([str(checkpoint)], cfg)

        def run(engine=engine) -> int:
            return sum(h[0].tokens + 1 for b in batches for h in engine.translate(b))

        run()  # warm-up
        start = time.perf_counter()
        tokens = run()
        plain = time.perf_counter() - start
        watch = Stopwatches()
        undo = instrument(engine, watch)
        watch.on = True
        start = time.perf_counter()
        run()
        total = time.perf_counter() - start
        for fn in undo:
            fn()
        steps = watch.calls["decode_step"]
        shares = parts(watch, total)
        print(
            f"\n{dtype}: {tokens / plain:,.0f} tok/s without stopwatches, {total / plain:.3f}x "
            f"the time with them; {steps} steps, {total / steps * 1e3:.2f} ms each"
        )
        for name in PARTS:
            ms = shares[name] / steps * 1e3
            print(f"  {name:<16} {ms:7.2f} ms  {shares[name] / total:6.1%}")


if __name__ == "__main__":
    main()
