"""Training throughput on one GPU (issue 53): Transformer-base and -big shapes on synthetic
batches, bf16, eager and compiled (``mtkit train --compile``), target tokens/s and MFU against
the bf16 matmul peak measured in the same run, with NVIDIA's fairseq figures beside.

Each row runs real mtkit updates (benchmarks/bench_train_mtkit.py: the Stepper `mtkit train`
uses, its bucketed token batches, label-smoothed loss, Adam, clipping) on random ids with
Multi30k-like lengths and an 8,000-piece vocabulary; the compiled rows' warmup updates compile,
and their seconds are printed. On an H200 the defaults took about 7.5 minutes, most of them the
two compiled rows' first compiles (199 s each there, 2026-11-29, when dynamo still traced the
model twice: 9d2f993 traces it once, 27-29 % less compiling on CPU); ``--compile off`` about a
minute. On CPU, a dry run:

    python benchmarks/gpu/train_throughput.py                      # on the GPU machine
    python benchmarks/gpu/train_throughput.py --device cpu --precision fp32 --presets \\
        transformer-small --max-tokens 1024 --updates 2 --warmup 2 --pairs 2000  # dry run
"""

from __future__ import annotations

import argparse
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
    args = p.parse_args(argv)
    if args.device.startswith("cuda"):
        print("device:", torch.cuda.get_device_name(), "| torch", torch.__version__)
    if "on" in args.compile.split(","):  # the first compile's time depends on its workers
        from torch._inductor import config as inductor_config

        print("inductor compile threads:", inductor_config.compile_threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = str(write_synthetic(Path(tmp) / "data", args.pairs))
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
                    print(
                        "    " + ", ".join(f"{k} {v:.1f} s" for k, v in r["compile_phases"].items())
                    )
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


if __name__ == "__main__":
    main()
