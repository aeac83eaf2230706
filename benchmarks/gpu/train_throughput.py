"""Training throughput on one GPU (issue 53): Transformer-base and -big shapes on synthetic
batches, bf16, eager and compiled (``mtkit train --compile``), target tokens/s and MFU against
the bf16 matmul peak measured in the same run, with NVIDIA's fairseq figures beside.

Each row runs real mtkit updates (benchmarks/bench_train_mtkit.py: the Stepper `mtkit train`
uses, its bucketed token batches, label-smoothed loss, Adam, clipping) on random ids with
Multi30k-like lengths and an 8,000-piece vocabulary.

Compiling took most of the first H200 run (7.5 minutes, 199 s per preset, 2026-11-29, when
dynamo still traced the model twice: 9d2f993 traces it once, 27-29 % less compiling on CPU). So
before any row is measured, one child process per preset compiles that preset's graphs (the
warmup updates of its compiled row, the same batches), all presets at once, into inductor's
and AOTAutograd's caches on disk; each compiled row then loads its graphs from there (its line
shows the cache hits) and its warmup seconds are dynamo's trace and the loading. The children's
cold compile seconds are printed as they end. Nothing is measured while they run. ``--warm
none``: each compiled row compiles cold in turn, as before. On CPU, a dry run:

    python benchmarks/gpu/train_throughput.py                      # on the GPU machine
    python benchmarks/gpu/train_throughput.py --device cpu --precision fp32 --presets \\
        transformer-small,transformer-base --max-tokens 1024 --updates 2 --warmup 2 \\
        --pairs 2000  # dry run
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1]))

import torch  # noqa: E402
from bench_train_mtkit import bench_train_mtkit, write_synthetic  # noqa: E402

# NVIDIA's DeepLearningExamples (PyTorch Transformer, fairseq-based), WMT14 en-de, big model,
# AMP: tokens/s as their README's training performance table reports them
FAIRSEQ_BIG = {"1x A100 80GB, AMP": 82_000, "8x A100 80GB, AMP": 552_000}
A100_BF16_PEAK = 312e12  # NVIDIA's datasheet, dense


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--presets", default="transformer-base,transformer-big")
    p.add_argument("--compile", default="off,on", help="the modes to run, comma-separated")
    p.add_argument("--precision", default="bf16")
    p.add_argument("--max-tokens", type=int, default=16384)
    p.add_argument("--updates", type=int, default=20)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--pairs", type=int, default=60000, help="synthetic pairs")
    p.add_argument(
        "--warm",
        choices=("parallel", "none"),
        default="parallel",
        help="compile every preset's graphs at once in child processes before measuring",
    )
    p.add_argument("--warm-data", help=argparse.SUPPRESS)  # a child: compile on this data
    args = p.parse_args(argv)
    if args.warm_data:
        return compile_once(args)
    if args.device.startswith("cuda"):
        print("device:", torch.cuda.get_device_name(), "| torch", torch.__version__)
    if "on" in args.compile.split(","):  # the first compile's time depends on its workers
        from torch._inductor import config as inductor_config

        print("inductor compile threads:", inductor_config.compile_threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = str(write_synthetic(Path(tmp) / "data", args.pairs))
        if args.warm == "parallel" and "on" in args.compile.split(","):
            warm_caches(args, data)
        for preset in args.presets.split(","):
            for mode in args.compile.split(","):
                began = time.perf_counter()
                r = bench_train_mtkit(
                    data,
                    args.max_tokens,
                    args.updates,
                    args.warmup,
                    args.device,
                    args.precision,
                    preset,
                    compile=mode,
                )
                r.update(preset=preset, mode=mode, total=time.perf_counter() - began)
                rows.append(r)
                print(
                    f"{preset:18s} {'compiled' if r['compiled'] else 'eager':8s} "
                    f"{r['precision']:5s} {r['tgt_tokens_per_s']:>10,.0f} tgt tok/s  "
                    f"MFU {100 * r['mfu_vs_train_dtype_peak']:5.1f}% of "
                    f"{r['matmul_peak_train_dtype'] / 1e12:,.1f} TFLOP/s  "
                    f"warmup {r['warmup_seconds']:5.1f} s  row {r['total']:5.1f} s",
                    flush=True,
                )
                if r["compile_phases"]:  # where the first compile went (dynamo's timers)
                    print("    " + compile_report(r))
    for preset in args.presets.split(","):
        mine = {r["mode"]: r["tgt_tokens_per_s"] for r in rows if r["preset"] == preset}
        if "on" in mine and "off" in mine:
            print(f"{preset}: compiled / eager {mine['on'] / mine['off']:.2f}x")
    print("NVIDIA fairseq Transformer-big (tokens/s as they report them):", FAIRSEQ_BIG)
    for r in rows:  # their tokens/s at this row's FLOPs per target token, against an A100
        if r["preset"] == "transformer-big" and r["mode"] == "off":
            per_token = r["model_flops_per_s"] / r["tgt_tokens_per_s"]
            mfu = FAIRSEQ_BIG["1x A100 80GB, AMP"] * per_token / A100_BF16_PEAK
            print(
                f"  1x A100 at {per_token / 1e9:.2f} GFLOP per target token (these lengths): "
                f"MFU {100 * mfu:.1f}% of the A100's {A100_BF16_PEAK / 1e12:.0f} TFLOP/s "
                "dense bf16 (if their tokens are target tokens)"
            )


def compile_report(r: dict) -> str:
    """A compiled row's compile phases (dynamo's timers) and its hits in the caches on disk."""
    phases = [f"{k} {v:.1f} s" for k, v in r["compile_phases"].items()]
    return ", ".join(phases + [f"{k} {v}" for k, v in r["compile_cache"].items()])


def compile_once(args: argparse.Namespace) -> None:
    """A child of :func:`warm_caches`: the warmup updates of ``args.presets``' compiled row, on
    the same data, so that the graphs it compiles are those the row will ask for."""
    r = bench_train_mtkit(
        args.warm_data,
        args.max_tokens,
        1,
        args.warmup,
        args.device,
        args.precision,
        args.presets,
        compile="on",
    )
    print(f"{args.presets}: compiled in {r['warmup_seconds']:.1f} s; {compile_report(r)}")


def warm_caches(args: argparse.Namespace, data: str) -> None:
    """Compile each preset's graphs in a child process of its own, all at once, into the caches
    on disk the measured rows then load (inductor's and AOTAutograd's: each process's default,
    or TORCHINDUCTOR_CACHE_DIR's). A child that fails leaves its row to compile cold."""
    began = time.perf_counter()
    options = ["--device", args.device, "--precision", args.precision, "--warm-data", data]
    options += ["--max-tokens", str(args.max_tokens), "--warmup", str(args.warmup)]
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "--presets", preset, *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        for preset in args.presets.split(",")
    ]
    for preset, child in zip(args.presets.split(","), children, strict=True):
        out, _ = child.communicate()
        if child.returncode == 0:
            print("warm:", out.strip().splitlines()[-1], flush=True)
        else:  # the row compiles cold; say why not here
            print(f"warm: {preset} failed (rc {child.returncode}):", out[-2000:], flush=True)
    print(f"warm: all presets compiled in {time.perf_counter() - began:.1f} s", flush=True)


if __name__ == "__main__":
    main()
