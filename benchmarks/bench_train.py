"""Training throughput: mtkit against JoeyNMT 2.3.0, same machine, same run, same data.

Both tools train the same Transformer (transformer-small: 3+3 layers, d=256, 4 heads, FFN 1024,
ReLU, post-LN, sinusoidal positions, embeddings scaled by sqrt(d), all embeddings and the output
projection shared, dropout 0.1) on Multi30k en-de, tokenised by one joint sentencepiece BPE
model (8000 pieces), with the same batch size in tokens, the same optimiser settings (Adam
0.9/0.98, inverse-sqrt warmup, label smoothing 0.1, clipping 1.0), fp32, on CPU with the same
torch version and thread count. They run one after the other in one invocation.

What is measured, for both tools alike: **target tokens per second** = non-padding target
tokens (EOS included, BOS not) of updates W+1 .. W+N, divided by the wall time of those N
updates (W = --warmup, skipped; N = --updates). The wall time covers everything a training step
costs (data loading and batching, forward, backward, clipping, optimiser, logging); there is no
validation inside the window.

- JoeyNMT: a probe (joeynmt_probe.py) wraps ``TrainManager._train_step`` and records the start
  time and ``batch.ntokens`` of every update; the window runs from the start of update W+1 to
  the start of update W+N+1.
- mtkit: runs unmodified through `mtkit train`; the window's time is the difference of the
  ``elapsed`` fields (taken right after each optimizer step) of updates W and W+N in its
  metrics.jsonl; its tokens are counted by replaying its deterministic batch order.
- Cross-check: each tool's own logged rate (JoeyNMT's "Tokens per Sec", mtkit's
  ``tgt_tokens_per_s``; both count non-padding target tokens with EOS) per logging interval,
  combined time-weighted over the same window, is printed beside.

MFU is model FLOPs per second over the fp32 matmul peak measured here, in this run, with the
same threads. Model FLOPs are 3x the forward matmul FLOPs of the real (unpadded) tokens,
averaged over the training corpus (see ``train_flops_per_target_token``), so MFU and tokens/s
give the same ratio between tools.

``mtkit bf16`` rows (in --tools by default) train the same mtkit config with ``precision:
bf16`` (autocast on CPU; fp32 master weights) and print their ratio to mtkit fp32 of the same
round; MFU stays against the fp32 peak. The output starts with the CPU and its bf16/AMX flags.

Run: ``.venv/bin/python benchmarks/bench_train.py`` (``--quick`` for a short smoke run;
``--rounds 2`` alternates the tools twice).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import flops  # noqa: E402
from flops import train_matmul_flops  # noqa: E402
from joeynmt_env import BENCH_DIR, ensure_joeynmt_venv  # noqa: E402
from machine import print_machine  # noqa: E402
from train_configs import D_MODEL, FFN, LAYERS, SRC, TGT, VOCAB_SIZE  # noqa: E402
from train_corpus import corpus_lengths, find_corpus, train_joint_spm, write_corpus  # noqa: E402
from train_report import NOTES, report  # noqa: E402
from train_runs import joeynmt_run, mtkit_run, prepare_mtkit  # noqa: E402

# ---------------------------------------------------------------------------------------------
# FLOPs and the matmul peak


def train_flops_per_target_token(src_lengths: list[int], tgt_lengths: list[int]) -> float:
    """Training matmul FLOPs (3x forward, :func:`flops.train_matmul_flops`) per non-padding
    target token (EOS included), corpus average."""
    total = train_matmul_flops(src_lengths, tgt_lengths, D_MODEL, FFN, VOCAB_SIZE, LAYERS, LAYERS)
    return total / (sum(tgt_lengths) + len(tgt_lengths))


def matmul_peak(threads: int) -> float:
    """Best fp32 FLOP/s of a 2048 x 2048 matmul on the CPU with ``threads`` torch threads."""
    import torch

    torch.set_num_threads(threads)
    return flops.matmul_peak("cpu")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", help="a folder with train/val .en/.de files (plain or .gz)")
    p.add_argument("--work-dir", default=str(BENCH_DIR / "train"), help="scratch (replaced)")
    p.add_argument("--warmup", type=int, default=20, help="updates run before the window")
    p.add_argument("--updates", type=int, default=100, help="updates measured")
    p.add_argument("--max-tokens", type=int, default=4096, help="batch size in tokens, both")
    p.add_argument("--joeynmt-max-tokens", type=int, help="JoeyNMT's batch size, if different")
    p.add_argument("--threads", type=int, default=2, help="torch threads, both tools")
    p.add_argument("--rounds", type=int, default=1, help="run both tools this many times")
    p.add_argument("--tools", default="joeynmt,mtkit,mtkit-bf16", help="comma-separated subset")
    p.add_argument("--log-every", type=int, default=10, help="both tools' logging interval")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per training run")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--quick", action="store_true", help="a short smoke run: 10 + 30 updates")
    args = p.parse_args(argv)
    if args.quick:
        args.warmup, args.updates = 10, 30
    if (
        args.warmup < args.log_every
        or args.warmup % args.log_every
        or args.updates % args.log_every
    ):
        p.error("--warmup and --updates must be positive multiples of --log-every")
    unknown = set(args.tools.split(",")) - {"joeynmt", "mtkit", "mtkit-bf16"}
    if unknown:
        p.error(f"unknown --tools {sorted(unknown)}")
    return args


def setup(args: argparse.Namespace, work: Path) -> tuple[Path, Path, float]:
    """Corpus copy, joint spm model, FLOPs per target token: (data dir, spm model, FLOPs)."""
    shutil.rmtree(work, ignore_errors=True)
    data = work / "data"
    corpus = write_corpus(find_corpus(args.data_dir), data)
    spm_model = train_joint_spm(corpus, data)
    return data, spm_model, train_flops_per_target_token(*corpus_lengths(spm_model, corpus))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print_machine()
    tools, work = args.tools.split(","), Path(args.work_dir)
    data, spm_model, flops_per_token = setup(args, work)
    peaks = [matmul_peak(args.threads)]  # before and after the runs; the best counts
    joey_python = ensure_joeynmt_venv() if "joeynmt" in tools else None
    mtkit_data = None
    if {"mtkit", "mtkit-bf16"} & set(tools):
        mtkit_data = prepare_mtkit(work / "mtkit-data", data, spm_model)
    results = []
    for rnd in range(1, args.rounds + 1):
        for tool in tools if rnd % 2 else tools[::-1]:  # alternate which tool goes first
            if tool == "joeynmt":
                run = joeynmt_run(joey_python, work / f"joeynmt-{rnd}", data, spm_model, args, rnd)
            else:
                precision = "bf16" if tool == "mtkit-bf16" else "fp32"
                run = mtkit_run(work / f"{tool}-{rnd}", mtkit_data, args, rnd, precision)
            results.append(run)
            print(f"  {run.tool}: {run.tok_s:,.0f} target tokens/s", flush=True)
    peaks.append(matmul_peak(args.threads))
    batch = f"{args.max_tokens}" + (
        f" (JoeyNMT {args.joeynmt_max_tokens})" if args.joeynmt_max_tokens else ""
    )
    peak = max(peaks)
    print(
        f"\nTraining throughput: Multi30k {SRC}-{TGT} ({VOCAB_SIZE} joint BPE), "
        f"transformer-small, CPU, {args.threads} torch threads, batch {batch} "
        f"tokens, updates {args.warmup + 1}-{args.warmup + args.updates} measured"
    )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}; torch {torch_version()}; parameters: "
        + ", ".join(sorted({f"{r.tool} {r.params:,}" for r in results}))
    )
    print(report(results, flops_per_token, peak))
    print(
        f"model FLOPs per target token (training): {flops_per_token / 1e6:.1f} M; fp32 matmul "
        f"peak measured here: {peak / 1e9:.1f} GFLOP/s (best of "
        f"{', '.join(f'{x / 1e9:.1f}' for x in peaks)}: before and after the runs)"
    )
    print(NOTES.format(max_tokens=args.max_tokens))
    print(f"command: {shlex.join(['python', *sys.argv])}")
    if args.json:
        rows = [dict(vars(r), tgt_tok_s=r.tok_s) for r in results]
        blob = {"results": rows, "peak_flops": peaks, "flops_per_token": flops_per_token}
        Path(args.json).write_text(json.dumps(blob, indent=1))


def torch_version() -> str:
    import torch

    return torch.__version__


if __name__ == "__main__":
    main()
