"""How long `mtkit train --compile on` takes to compile, where that time goes, and the step it
buys (issue 53): one process, the Stepper `mtkit train` uses, synthetic Multi30k-like batches.

Modes: ``off`` (eager), ``graph`` (``--compile on``: the model's pass as one graph), ``layers``
(an experiment, not an mtkit option: each encoder and decoder layer compiled on its own, as
PyTorch's "regional compilation" recipe does, one graph per kind of layer, the rest eager).
``--cold`` compiles into a fresh inductor cache, so the first updates pay the whole compile.
``--profile N`` then profiles N more updates (torch.profiler) and prints the operators that took
the most time of their own, with the matrix products' rates.

    python benchmarks/bench_compile_time.py --mode graph --preset transformer-base --cold
    python benchmarks/bench_compile_time.py --mode layers --device cuda --precision bf16 \
        --preset transformer-base --max-tokens 16384 --cold      # on a GPU
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import torch  # noqa: E402
from bench_train_mtkit import (  # noqa: E402
    compile_phases,
    load_groups,
    model_config,
    training_batches,
    write_synthetic,
)
from machine import print_machine  # noqa: E402

from mtkit.config import TrainConfig  # noqa: E402
from mtkit.data.binarized import ParallelData  # noqa: E402
from mtkit.training.compiled import tracing_options  # noqa: E402
from mtkit.training.step import Stepper  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=["off", "graph", "layers"], default="graph")
    p.add_argument("--preset", default="transformer-small")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--warmup", type=int, default=4, help="updates before the timed ones")
    p.add_argument("--updates", type=int, default=12, help="timed updates per round")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--device", default="cpu", help="cpu, or cuda (the GPU the next lease has)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--cold", action="store_true", help="compile into a fresh inductor cache")
    p.add_argument("--profile", type=int, default=0, help="updates profiled after the rounds")
    p.add_argument("--top", type=int, default=25, help="operators the profile prints")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print_machine()
    print("threads:", args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        if args.cold:  # read when inductor first compiles
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(tmp) / "inductor")
        run(args, str(write_synthetic(Path(tmp) / "data", 20000)))


def run(args: argparse.Namespace, data: str) -> None:
    cfg = TrainConfig(
        data=data,
        device=args.device,
        precision=args.precision,
        max_tokens=args.max_tokens,
        warmup_updates=4000,
        compile="on" if args.mode == "graph" else "off",
    )
    step = Stepper(cfg, model_config(data, args.preset))
    if args.mode == "layers":
        for layer in [*step.model.encoder, *step.model.decoder]:
            layer.compile(dynamic=True, fullgraph=True, options={"fallback_random": True})
    train = ParallelData(data, "train")
    batches = training_batches(train, cfg, args.warmup + args.updates * args.rounds + args.profile)
    groups = list(load_groups(train, batches, cfg, step.device)[0])

    def update(group) -> None:  # compile_graph's tracing options, for the layers' graphs too
        with tracing_options():
            step.forward_backward(group)
        step.optimizer_step()
        if step.device.type == "cuda":  # the update's kernels done before the clock is read
            torch.cuda.synchronize(step.device)

    began = time.perf_counter()
    for group in groups[: args.warmup]:
        update(group)
    print(
        f"{args.mode} {args.preset} {args.precision}: {args.warmup} first updates (compiling) "
        f"{time.perf_counter() - began:.1f} s",
        flush=True,
    )
    for phase, seconds in compile_phases().items():
        print(f"  {phase:28s} {seconds:7.1f} s")
    print("  graphs:", torch._dynamo.utils.counters["stats"]["unique_graphs"])
    for r in range(args.rounds):
        began = time.perf_counter()
        rows = groups[args.warmup + r * args.updates : args.warmup + (r + 1) * args.updates]
        for group in rows:
            update(group)
        print(
            f"  round {r + 1}: {len(rows)} updates {time.perf_counter() - began:.2f} s", flush=True
        )
    if args.profile:
        profile(groups[len(groups) - args.profile :], update, args.top)


def profile(groups: list, update, top: int) -> None:
    """The operators of ``groups``' updates by time of their own, and each one's rate."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    with profiler(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        began = time.perf_counter()
        for group in groups:
            update(group)
        wall = time.perf_counter() - began
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events) / 1e6
    print(f"profile: {len(groups)} updates, {wall:.2f} s, {total:.2f} s of operators' own time")
    for e in events[:top]:
        own = e.self_cpu_time_total / 1e6
        rate = f"{e.flops / own / 1e9:6.0f} GFLOP/s" if e.flops else ""
        print(f"  {e.key[:48]:48s} {own:7.3f} s {100 * own / total:5.1f} % {e.count:6d} {rate}")


if __name__ == "__main__":
    main()
