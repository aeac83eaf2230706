"""One decoder step, eager against ``--compile``'s graph (AOTInductor's library, dynamic
shapes) and the same graph under ``torch.compile`` (dynamic shapes, then every shape static)
(issue 31): where the compiled step's time goes, without the search around it.

The step runs at a fixed position (``--position``, default 15) for 32 test sentences x beam 5
(160 rows), on one thread, repeated; the median milliseconds per step are printed with the
ratios to eager. The demo model by default; ``--quantize int8`` for int8 linear layers,
``--dtype bf16`` for bf16 ones (``--cpu-matmul default``: plain layers traced into the graph).

    .venv/bin/python benchmarks/probe_compiled_step.py [CKPT] [--quantize int8]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable

import torch
from multi30k import read_text

from mtkit.allocator import keep_freed_memory
from mtkit.checkpoint import load_for_inference
from mtkit.decoding.batching import pad_batch
from mtkit.model.compiled import _Step, compile_step
from mtkit.model.inference import prepare_for_inference
from mtkit.model.state import DecoderState
from mtkit.model.transformer import Transformer

CPU = torch.device("cpu")


def state_at(
    model: Transformer, src: torch.Tensor, tokens: torch.Tensor, beam: int, position: int
) -> DecoderState:
    """A beam search's state after ``position`` steps of feeding ``tokens`` (eagerly), as the
    model starts its states (a compiled one: pointer caches)."""
    state = model.start_state(model.encode(src), position + 8)
    n = src.shape[0]
    state.reorder(torch.arange(n).repeat_interleave(beam), torch.arange(n))
    for _ in range(position):
        Transformer.decode_step(model, tokens, state)
    return state


def median_ms(
    step: Callable, tokens: torch.Tensor, state: DecoderState, position: int, repeat: int = 60
) -> float:
    """Median time of ``step`` at ``position``, the state rewound before each call."""
    times = []
    for _ in range(repeat + 5):
        for layer in state.layers:
            layer.own.length = position
        state.offset = position
        start = time.perf_counter()
        step(tokens, state)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times[5:])


def main(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    keep_freed_memory()
    loaded = load_for_inference(args.checkpoint)
    lines = read_text("test_2016_flickr", "en")[: args.sentences]
    eos, pad = loaded.src_tokenizer.specials.eos, loaded.src_tokenizer.specials.pad
    src = pad_batch([r + [eos] for r in loaded.src_tokenizer.encode(lines)], CPU, pad)
    tokens = torch.randint(10, loaded.config.tgt_vocab_size, (len(lines) * args.beam,))
    how = (CPU, args.dtype, args.quantize, args.cpu_matmul)
    eager = prepare_for_inference(copy.deepcopy(loaded.model), *how)
    model = prepare_for_inference(loaded.model, *how)
    compile_step(model, CPU)
    t = args.position
    with torch.inference_mode():
        state = state_at(eager, src, tokens, args.beam, t)
        eager_ms = median_ms(lambda x, s: Transformer.decode_step(eager, x, s), tokens, state, t)
        state = state_at(model, src, tokens, args.beam, t)
        aoti_ms = median_ms(model.decode_step, tokens, state, t)
        step = model.decode_step
        graphs = {}
        for name, dynamic in (("dynamic", True), ("static", False)):
            step.graph = torch.compile(_Step(model), dynamic=dynamic)
            graphs[name] = median_ms(step, tokens, state, t)
    print(
        f"{args.quantize or args.dtype} ({args.cpu_matmul}), {len(lines)} sentences x beam "
        f"{args.beam}, step {t}, 1 thread: eager {eager_ms:.2f} ms, --compile's library "
        f"{aoti_ms:.2f} ms "
        f"({eager_ms / aoti_ms:.2f}x); the graph by torch.compile: dynamic "
        f"{graphs['dynamic']:.2f} ms ({eager_ms / graphs['dynamic']:.2f}x), static "
        f"{graphs['static']:.2f} ms ({eager_ms / graphs['static']:.2f}x)"
    )


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("checkpoint", nargs="?", default="work/demo/en-de/demo-run/checkpoint_last.pt")
    p.add_argument("--quantize", default="", choices=["", "int8"])
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    p.add_argument(
        "--cpu-matmul",
        default="onednn",
        choices=["onednn", "default"],
        help="default: linear layers traced into the graph (bf16: F.linear in bf16)",
    )
    p.add_argument("--sentences", type=int, default=32)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--position", type=int, default=15)
    return p.parse_args()


if __name__ == "__main__":
    main(parse_args())
