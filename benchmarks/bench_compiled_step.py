"""The compiled decoding step alone: milliseconds a call at R rows over T cached slots, for a
plain decode (every row from slot 0) and a joined one (each sentence's rows from a random
first slot, as in a server's decode), two builds of the step alternated in one process.

The two builds: the step as mtkit builds it, and the same step keeping a bf16 model's
self-attention values in float32 (``--against float32-values``; mtkit keeps them in bf16, the
numbers a bf16 layer made), compiled into a folder of its own. Blocks of ``--calls`` calls of
each alternate ``--rounds`` times on the same state (random keys and values, every pointer at
its own row), so the machine's drift falls on both alike; the table gives the means and their
ratio.

    MTKIT_COMPILED_DIR=.bench/compiled .venv/bin/python benchmarks/bench_compiled_step.py CKPT \
        [--sentences 32] [--beam 5] [--slots 12,30,45] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
from machine import print_machine

from mtkit.config import TranslateConfig
from mtkit.model import compiled

SOURCE_PIECES = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--sentences", type=int, default=32)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--slots", default="12,30,45")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--against", default="float32-values", choices=["float32-values"])
    args = parser.parse_args()
    print_machine()
    torch.set_num_threads(args.threads)
    from mtkit.engines import load_engine

    def model(folder: Path | None):
        flat = {"beam": args.beam, "dtype": "fast", "compile": "on"}
        if folder is not None:
            os.environ["MTKIT_COMPILED_DIR"] = str(folder)
        engine = load_engine([args.checkpoint], TranslateConfig.from_flat(flat))
        engine.models[0].decode_step.prepare_joins()  # the joined decode's graph
        return engine.models[0]

    default = compiled.cache_dir()
    mtkit = model(None)
    kept = compiled._values_dtype
    compiled._values_dtype = lambda _: None  # the other build: values in the keys' dtype
    try:
        other = model(default.parent / f"{default.name}-{args.against}")
    finally:
        compiled._values_dtype = kept
        os.environ["MTKIT_COMPILED_DIR"] = str(default)
    n, g = args.sentences, args.beam
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(10, 1000, (n, SOURCE_PIECES), generator=generator)
    tokens = torch.randint(10, 1000, (n * g,), generator=generator)
    print(
        f"\n{n} sentences x beam {g} = {n * g} rows, {SOURCE_PIECES} source pieces, "
        f"{args.threads} thread(s)\n"
    )
    print(f"| slots | decode | mtkit ms | {args.against} ms | ratio |\n|---:|---|---:|---:|---:|")
    with torch.inference_mode():
        for t in map(int, args.slots.split(",")):
            states = [state_at(mtkit, src, g, t), state_at(other, src, g, t, as_keys=True)]
            values = [s.layers[0].own.v.dtype for s in states]
            assert values[0] != values[1], f"both builds keep values in {values[0]}"
            spread = torch.randint(0, t, (n,), generator=generator).repeat_interleave(g)
            for kind, first in (("plain", None), ("joined", spread)):
                runs = [
                    lambda m=m, s=s, f=first: block(m, s, tokens, f, args.calls)
                    for m, s in zip((mtkit, other), states, strict=True)
                ]
                for run in runs:
                    run()  # warm-up
                times = [0.0, 0.0]
                for r in range(args.rounds):
                    for i in (0, 1) if r % 2 else (1, 0):
                        times[i] += runs[i]() / args.rounds
                print(
                    f"| {t} | {kind} | {times[0]:.2f} | {times[1]:.2f} | "
                    f"{times[0] / times[1]:.2f}x |",
                    flush=True,
                )


def state_at(model, src: torch.Tensor, beam: int, slots: int, as_keys: bool = False):
    """A decode of ``src`` at ``slots`` cached slots, ``beam`` rows a sentence, random keys and
    values (``as_keys``: values in the keys' dtype), every row's pointers at its own row."""
    state = model.start_state(model.encode(src), 80)
    n = src.shape[0]
    state.reorder(torch.arange(n).repeat_interleave(beam), torch.arange(n))
    for layer in state.layers:
        if as_keys:
            layer.own.v = layer.own.v.to(layer.own.k.dtype)
        layer.own.k.normal_()
        layer.own.v.normal_()
        layer.own.length = slots
        layer.own.origin = torch.arange(n * beam)[:, None].repeat(1, layer.own.origin.shape[1])
    state.offset = slots
    return state


def block(model, state, tokens: torch.Tensor, first, calls: int) -> float:
    """Milliseconds a call of ``calls`` steps at the state's slot (each call rewinds it)."""
    slots = state.offset
    start = time.perf_counter()
    for _ in range(calls):
        for layer in state.layers:
            layer.own.length = slots
        state.offset, state.first = slots, first
        model.decode_step(tokens, state)
    state.offset = slots
    return (time.perf_counter() - start) / calls * 1000


if __name__ == "__main__":
    main()
