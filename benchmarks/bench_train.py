"""Training throughput: mtkit against JoeyNMT 2.3.0 and Eole 0.6.4, same machine, same run,
same data.

The tools train the same Transformer (transformer-small: 3+3 layers, d=256, 4 heads, FFN 1024,
ReLU, post-LN, sinusoidal positions, embeddings scaled by sqrt(d), all embeddings and the output
projection shared, dropout 0.1; Eole's decoder has no post-LN option, so Eole runs pre-LN, the
same matmuls) on Multi30k en-de, tokenised by one joint sentencepiece BPE
model (8000 pieces), with the same batch size in tokens, the same optimiser settings (Adam
0.9/0.98, inverse-sqrt warmup, label smoothing 0.1, clipping 1.0), fp32, on CPU with the same
torch version and thread count. They run one after the other in one invocation.

What is measured, for all tools alike: **target tokens per second** = non-padding target
tokens (EOS included, BOS not) of updates W+1 .. W+N, divided by the wall time of those N
updates (W = --warmup, skipped; N = --updates). The wall time covers everything a training step
costs (data loading and batching, forward, backward, clipping, optimiser, logging); there is no
validation inside the window.

- JoeyNMT: a probe (joeynmt_probe.py) wraps ``TrainManager._train_step`` and records the start
  time and ``batch.ntokens`` of every update; the window runs from the start of update W+1 to
  the start of update W+N+1.
- Eole: the same, with its probe (eole_probe.py) around ``Trainer._train_step``; non-padding
  target tokens are those of ``batch["tgt"][:, 1:]`` (pieces and EOS; Eole's target tensor
  starts with BOS). Eole reads the corpus already cut into the same spm model's pieces
  (``prepare_eole``, outside the run, as `mtkit prepare` is for mtkit), with no transform.
- mtkit: runs unmodified through `mtkit train`; the window's time is the difference of the
  ``elapsed`` fields (taken right after each optimizer step) of updates W and W+N in its
  metrics.jsonl; its tokens are counted by replaying its deterministic batch order.
- Cross-check: each tool's own logged rate (JoeyNMT's "Tokens per Sec", Eole's target "tok/s",
  mtkit's ``tgt_tokens_per_s``; all count non-padding target tokens with EOS) per logging interval,
  combined time-weighted over the same window, is printed beside.

MFU is model FLOPs per second over the fp32 matmul peak measured here, in this run, with the
same threads. Model FLOPs are 3x the forward matmul FLOPs of the real (unpadded) tokens,
averaged over the training corpus (see ``train_flops_per_target_token``), so MFU and tokens/s
give the same ratio between tools.

``mtkit bf16`` rows (in --tools by default) train the same mtkit config with ``precision:
bf16`` (autocast on CPU; fp32 master weights) and print their ratio to mtkit fp32 of the same
round; MFU stays against the fp32 peak. The output starts with the CPU and its bf16/AMX flags.
Opt-in rows: ``eole-bf16`` (Eole's ``compute_dtype: bf16``, CPU autocast; its best CPU setting:
Eole's ``EOLE_TORCH_COMPILE`` compiles decoder layers for one-token decoding steps only, and
training stays eager) and ``mtkit-compiled`` (the mtkit config with ``compile: on``), each
with its ratio to its own fp32 row of the same round.

Run: ``.venv/bin/python benchmarks/bench_train.py`` (``--quick`` for a short smoke run;
``--rounds 2`` alternates the tools twice; ``--tools`` picks from TOOLS).
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
from eole_env import ensure_eole_venv  # noqa: E402
from flops import train_matmul_flops  # noqa: E402
from joeynmt_env import BENCH_DIR, ensure_joeynmt_venv  # noqa: E402
from machine import print_machine  # noqa: E402
from train_configs import D_MODEL, FFN, LAYERS, SRC, TGT, VOCAB_SIZE  # noqa: E402
from train_corpus import corpus_lengths, find_corpus, train_joint_spm, write_corpus  # noqa: E402
from train_report import NOTES, report  # noqa: E402
from train_runs import eole_run, joeynmt_run, mtkit_run, prepare_eole, prepare_mtkit  # noqa: E402

TOOLS = ("joeynmt", "eole", "eole-bf16", "mtkit", "mtkit-bf16", "mtkit-compiled")
DEFAULT_TOOLS = "joeynmt,eole,mtkit,mtkit-bf16"

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
    p.add_argument("--max-tokens", type=int, default=4096, help="batch size in tokens, all tools")
    p.add_argument("--joeynmt-max-tokens", type=int, help="JoeyNMT's batch size, if different")
    p.add_argument("--eole-max-tokens", type=int, help="Eole's batch size, if different")
    p.add_argument("--threads", type=int, default=2, help="torch threads, all tools")
    p.add_argument("--rounds", type=int, default=1, help="run all tools this many times")
    p.add_argument("--tools", default=DEFAULT_TOOLS, help=f"a subset of {','.join(TOOLS)}")
    p.add_argument("--log-every", type=int, default=10, help="all tools' logging interval")
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
    unknown = set(args.tools.split(",")) - set(TOOLS)
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
    eole_python, eole_data, mtkit_data = None, None, None
    if {"eole", "eole-bf16"} & set(tools):
        eole_python = ensure_eole_venv()
        eole_data = prepare_eole(work / "eole-data", data, spm_model)
    if any(tool.startswith("mtkit") for tool in tools):
        mtkit_data = prepare_mtkit(work / "mtkit-data", data, spm_model)
    results = []
    for rnd in range(1, args.rounds + 1):
        for tool in tools if rnd % 2 else tools[::-1]:  # alternate which tool goes first
            precision = "bf16" if tool.endswith("-bf16") else "fp32"
            out = work / f"{tool}-{rnd}"
            if tool == "joeynmt":
                run = joeynmt_run(joey_python, out, data, spm_model, args, rnd)
            elif tool.startswith("eole"):
                run = eole_run(eole_python, out, eole_data, args, rnd, precision)
            else:
                compiled = tool == "mtkit-compiled"
                run = mtkit_run(out, mtkit_data, args, rnd, precision, compiled)
            results.append(run)
            print(f"  {run.tool}: {run.tok_s:,.0f} target tokens/s", flush=True)
    peaks.append(matmul_peak(args.threads))
    own = {"JoeyNMT": args.joeynmt_max_tokens, "Eole": args.eole_max_tokens}
    batch = f"{args.max_tokens}" + "".join(f" ({k} {v})" for k, v in own.items() if v)
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
