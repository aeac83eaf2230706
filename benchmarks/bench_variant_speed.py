"""What each Transformer variant costs: parameters, training and decoding speed, decoding state.

For every variant of benchmarks/variants.py (the small preset, joint vocabulary of 8000), in one
process and one run, rounds alternating over the variants so that load from other work spreads
over all of them:

- parameters (shared weights counted once);
- training target tokens/s: real mtkit updates (bench_train_mtkit's Stepper loop) on a
  synthetic Multi30k-like dataset, ``--updates`` timed after ``--warmup``;
- beam-5 decoding target tokens/s: ``generate`` on ``--sentences`` random sources of 10-25
  pieces with every output forced to ``--length`` tokens (min_len = max_len), so every variant
  does the same work; random weights (speed does not depend on training);
- decoding state per sentence: bytes of KV cache (or running sums) and cross-attention keys and
  values after 30 steps of beam 5 over a 30-token source
  (``mtkit.model.inference.cache_bytes_per_sentence``).

Each figure is also given as a ratio to the baseline of the same run; the best of ``--rounds``
counts for speeds. Prints the CPU model and flags first. With ``--threads 1`` (the default)
speeds are tokens per CPU-second of this process (``time.process_time``), which other work on a
shared machine hardly changes; with more threads, tokens per wall-clock second.

    .venv/bin/python benchmarks/bench_variant_speed.py [--rounds 2] [--threads 1] [--only a,b]
        [--json benchmarks/results/variant_speed.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_train_mtkit import bench_train_mtkit, model_config, write_synthetic  # noqa: E402
from machine import machine_lines, print_machine  # noqa: E402
from variants import BASELINE, TRAIN_SETTINGS, VARIANTS  # noqa: E402

from mtkit.config import SearchConfig  # noqa: E402
from mtkit.data.tokenizer import EOS_ID, PAD_ID  # noqa: E402
from mtkit.decoding.search import generate  # noqa: E402
from mtkit.model.inference import cache_bytes_per_sentence, prepare_for_inference  # noqa: E402
from mtkit.model.transformer import build_model, count_parameters  # noqa: E402


def sources(count: int, vocab: int, seed: int = 0) -> torch.Tensor:
    """(count, S) random source ids + EOS, right-padded, lengths 10..25."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(10, 26, (count,), generator=g).tolist()
    out = torch.full((count, max(lengths) + 1), PAD_ID, dtype=torch.long)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(4, vocab, (n,), generator=g)
        out[i, n] = EOS_ID
    return out


def decode_speed(
    model: torch.nn.Module, src: torch.Tensor, length: int, clock: Callable[[], float]
) -> float:
    """Beam-5 target tokens/s (EOS included) with every output forced to ``length`` tokens."""
    search = SearchConfig(beam=5, max_len_a=0.0, max_len_b=length, min_len=length)
    generate([model], src[:4], search)  # warm-up
    start = clock()
    found = generate([model], src, search)
    seconds = clock() - start
    return sum(len(hyps[0].tokens) + 1 for hyps in found) / seconds


def measure(name: str, data: str, args: argparse.Namespace) -> dict[str, float]:
    preset, overrides = VARIANTS[name]
    cfg = model_config(data, preset, overrides)
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    params = count_parameters(model)  # before packing: packed layers hold no parameters
    clock = time.process_time if args.threads == 1 else time.perf_counter
    train = bench_train_mtkit(
        data, args.max_tokens, args.updates, args.warmup, "cpu", "fp32", preset, overrides, clock
    )
    ready = prepare_for_inference(model, torch.device("cpu"))  # packed fp32, as translate does
    return {
        "params": params,
        "train": train["tgt_tokens_per_s"],
        "decode": decode_speed(
            ready, sources(args.sentences, cfg.src_vocab_size), args.length, clock
        ),
        "state": cache_bytes_per_sentence(build_model(cfg).eval(), src_len=30, steps=30, beam=5),
    }


def report(best: dict[str, dict[str, float]]) -> str:
    base = best[BASELINE]
    head = (
        f"{'variant':<16} {'params':>10} {'x':>6} {'train tok/s':>12} {'x':>6} "
        f"{'beam5 tok/s':>12} {'x':>6} {'state KiB/sent':>15} {'x':>6}"
    )
    lines = [head]
    for name, r in best.items():
        lines.append(
            f"{name:<16} {r['params']:>10,.0f} {r['params'] / base['params']:6.2f} "
            f"{r['train']:12,.0f} {r['train'] / base['train']:6.2f} "
            f"{r['decode']:12,.0f} {r['decode'] / base['decode']:6.2f} "
            f"{r['state'] / 1024:15,.0f} {r['state'] / base['state']:6.2f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--updates", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=2048)
    parser.add_argument("--sentences", type=int, default=48)
    parser.add_argument("--length", type=int, default=20)
    parser.add_argument("--only", default="", help="comma-separated variant names")
    parser.add_argument(
        "--json",
        type=Path,
        help="also write the figures here (bench_variants.py --speeds reads them)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    # a row that differs in training settings only (the learning rate) has the same speed
    names = [BASELINE] + [n for n in VARIANTS if n != BASELINE and n not in TRAIN_SETTINGS]
    if args.only:
        names = [BASELINE] + [n for n in args.only.split(",") if n != BASELINE]
    unit = "CPU-second" if args.threads == 1 else "wall-clock second"
    print_machine()
    print(f"{args.threads} thread(s); speeds in tokens per {unit}", flush=True)
    best: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = str(write_synthetic(Path(tmp) / "data", 20000))
        for round_ in range(args.rounds):
            for name in names:
                r = measure(name, data, args)
                old = best.get(name)
                best[name] = (
                    r
                    if old is None
                    else {
                        **r,
                        "train": max(r["train"], old["train"]),
                        "decode": max(r["decode"], old["decode"]),
                    }
                )
                print(
                    f"  round {round_ + 1} {name}: train {r['train']:,.0f} tok/s, "
                    f"beam5 {r['decode']:,.0f} tok/s",
                    flush=True,
                )
    print()
    print(report(best))
    if args.json:
        settings = {k: getattr(args, k) for k in ("rounds", "threads", "updates", "max_tokens")}
        record = {"machine": machine_lines(), "unit": unit, **settings, "variants": best}
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
