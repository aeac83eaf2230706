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
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import flops  # noqa: E402
import multi30k  # noqa: E402
from flops import train_matmul_flops  # noqa: E402
from joeynmt_env import BENCH_DIR, ensure_joeynmt_venv  # noqa: E402
from machine import print_machine  # noqa: E402
from train_configs import (  # noqa: E402
    D_MODEL,
    FFN,
    LAYERS,
    SRC,
    TGT,
    VOCAB_SIZE,
    joeynmt_config,
    mtkit_config,
)

SPLITS = {"train": "train", "valid": "val"}  # our name -> Multi30k file stem


@dataclass
class Result:
    """One tool's measured window: updates W+1 .. W+N."""

    tool: str
    round: int
    tokens: dict[int, int]  # update -> non-padding target tokens (EOS included)
    seconds: float  # wall time of the window
    padded: int  # target positions including padding, over the window
    own_tok_s: float | None  # the tool's own logged tokens/s over the window, combined
    params: int  # parameter count the tool reports

    @property
    def tgt_tokens(self) -> int:
        return sum(self.tokens.values())

    @property
    def tok_s(self) -> float:
        return self.tgt_tokens / self.seconds


# ---------------------------------------------------------------------------------------------
# Data and tokenisation


def find_corpus(data_dir: str | None) -> dict[str, dict[str, Path]]:
    """Paths of the train/valid files per language: --data-dir, the shipped .gz copy, shared/."""
    dirs = (Path(data_dir),) if data_dir else (multi30k.SHIPPED, multi30k.SHARED)
    paths = {
        split: {lang: multi30k.find(stem, lang, dirs) for lang in (SRC, TGT)}
        for split, stem in SPLITS.items()
    }
    if any(path is None for langs in paths.values() for path in langs.values()):
        raise SystemExit(f"no Multi30k train/val {SRC}-{TGT} files in {', '.join(map(str, dirs))}")
    return paths


def read_lines(path: Path) -> list[str]:
    return [line.strip() for line in multi30k.read_lines(path)]


def write_corpus(paths: dict[str, dict[str, Path]], out: Path) -> dict[str, dict[str, list[str]]]:
    """Stripped copies of the corpus (both tools read these) as out/{train,valid}.{en,de}."""
    out.mkdir(parents=True, exist_ok=True)
    corpus = {}
    for split, langs in paths.items():
        corpus[split] = {lang: read_lines(path) for lang, path in langs.items()}
        for lang, lines in corpus[split].items():
            (out / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    n = len(corpus["train"][SRC])
    assert all(len(c[SRC]) == len(c[TGT]) for c in corpus.values()), "unaligned corpus"
    assert all(all(c[SRC]) and all(c[TGT]) for c in corpus.values()), "empty lines in corpus"
    print(f"data: {n} training pairs from {paths['train'][SRC].parent}", flush=True)
    return corpus


def train_joint_spm(corpus: dict[str, dict[str, list[str]]], out: Path) -> Path:
    """One joint BPE model for both tools; also a JoeyNMT vocabulary file of its pieces."""
    import sentencepiece as spm

    from mtkit.data.tokenizer import train_spm

    model = out / "spm.model"
    lines = corpus["train"][SRC] + corpus["train"][TGT]
    model.write_bytes(train_spm(lines, VOCAB_SIZE, seed=1, num_threads=2))
    sp = spm.SentencePieceProcessor(model_file=str(model))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    (out / "vocab.txt").write_text("\n".join(pieces) + "\n", encoding="utf-8")
    print(f"spm: {len(pieces)} pieces -> {model}", flush=True)
    return model


def corpus_lengths(model: Path, corpus: dict[str, dict[str, list[str]]]) -> tuple[list, list]:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model))
    src = [len(ids) for ids in sp.encode(corpus["train"][SRC])]
    tgt = [len(ids) for ids in sp.encode(corpus["train"][TGT])]
    return src, tgt


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


# ---------------------------------------------------------------------------------------------
# JoeyNMT


def thread_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    return env


def run_logged(cmd: list[str], log: Path, args: argparse.Namespace, what: str) -> str:
    """Run a training command with the benchmark's thread settings; return its output."""
    print(f"  $ {shlex.join(cmd)}", flush=True)
    with open(log, "w") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, check=False,
                              env=thread_env(args.threads), timeout=args.timeout)  # fmt: skip
    text = log.read_text(encoding="utf-8", errors="replace")
    if proc.returncode:
        raise RuntimeError(f"{what} failed (see {log}):\n" + "\n".join(text.splitlines()[-30:]))
    return text


def combined_rate(logged: dict[int, float], tokens: dict[int, int], every: int) -> float | None:
    """A tool's own per-interval tokens/s lines over the window, combined time-weighted.

    ``logged`` maps update k to the rate the tool printed for updates k-every+1 .. k; ``tokens``
    maps each update of the window to its target tokens (the intervals must lie inside it).
    """
    inside = {
        k: r for k, r in logged.items() if all(u in tokens for u in range(k - every + 1, k + 1))
    }
    if not inside:
        return None
    counts = {k: sum(tokens[u] for u in range(k - every + 1, k + 1)) for k in inside}
    return sum(counts.values()) / sum(counts[k] / inside[k] for k in inside)


def joeynmt_run(python: Path, work: Path, data: Path, spm_model: Path, args, rnd: int) -> Result:
    """JoeyNMT under the probe; window figures from the probe's per-update records."""
    work.mkdir(parents=True)
    config = work / "config.yaml"
    config.write_text(yaml.safe_dump(joeynmt_config(work, data, spm_model, args), sort_keys=False))
    probe = work / "probe.jsonl"
    cmd = [str(python), str(HERE / "joeynmt_probe.py"), str(probe), str(args.threads)]
    print(f"[round {rnd}] JoeyNMT", flush=True)
    run_logged([*cmd, "train", str(config), "--skip-test"], work / "stdout.log", args, "JoeyNMT")
    by_update = {r["update"]: r for r in map(json.loads, probe.read_text().splitlines())}
    first, end = args.warmup + 1, args.warmup + args.updates + 1  # window: [first, end)
    if any(u not in by_update for u in range(first, end + 1)):
        raise RuntimeError(f"{probe}: updates {first}..{end} not all recorded")
    tokens = {u: by_update[u]["tgt_tokens"] for u in range(first, end)}
    log = (work / "model" / "train.log").read_text(encoding="utf-8")
    logged = {int(m[1]): float(m[2]) for m in JOEY_RATE.finditer(log)}
    return Result(
        tool="JoeyNMT 2.3.0",
        round=rnd,
        tokens=tokens,
        seconds=by_update[end]["t"] - by_update[first]["t"],
        padded=sum(by_update[u]["tgt_padded"] for u in tokens),
        own_tok_s=combined_rate(logged, tokens, args.log_every),
        params=int(JOEY_PARAMS.search(log)[1]),
    )


JOEY_RATE = re.compile(r"Step:\s+(\d+),.*Tokens per Sec:\s+(\d+)")
JOEY_PARAMS = re.compile(r"Total params:\s+(\d+)")


# ---------------------------------------------------------------------------------------------
# mtkit


def mtkit_cmd(*args: str) -> list[str]:
    """`mtkit ...` with this interpreter (the project's venv)."""
    return [sys.executable, "-m", "mtkit", *args]


def prepare_mtkit(out: Path, data: Path, spm_model: Path) -> Path:
    """Binarize the stripped corpus with the same spm model, unfiltered (as JoeyNMT reads it)."""
    options = {"--src-lang": SRC, "--tgt-lang": TGT, "--train": data / "train",
               "--valid": data / "valid", "--spm": spm_model, "--out-dir": out,
               "--max-tokens": 0, "--max-ratio": 0}  # fmt: skip
    cmd = mtkit_cmd("prepare", *(str(x) for item in options.items() for x in item), "--force")
    print(f"  $ {shlex.join(cmd)}", flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return out


def mtkit_update_tokens(data: Path, args: argparse.Namespace, seed: int) -> list[tuple[int, int]]:
    """(target tokens, padded target positions) of updates 1 .. W+N, replaying mtkit's batches.

    mtkit's batch order is a pure function of (sizes, max_tokens, seed, epoch) (see
    mtkit.training.batching), so each update's tokens are counted here, outside the run.
    """
    from mtkit.data.binarized import ParallelData
    from mtkit.training.batching import epoch_batches, sentence_sizes

    train = ParallelData(data, "train")
    sizes = sentence_sizes(train.src_lengths, train.tgt_lengths)
    tgt = train.tgt_lengths + 1  # + EOS
    batches, epoch = [], 1
    while len(batches) < args.warmup + args.updates:
        batches += [b.numpy() for b in epoch_batches(sizes, args.max_tokens, seed, epoch)]
        epoch += 1
    return [(int(tgt[b].sum()), len(b) * int(tgt[b].max())) for b in batches]


def mtkit_run(
    work: Path, data: Path, args: argparse.Namespace, rnd: int, precision: str = "fp32"
) -> Result:
    """`mtkit train`; window time from its metrics log, tokens from replaying its batches."""
    config = work.parent / f"{work.name}.yaml"
    cfg = mtkit_config(args, precision)
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    tool = "mtkit" if precision == "fp32" else f"mtkit {precision}"
    print(f"[round {rnd}] {tool}", flush=True)
    cmd = mtkit_cmd("train", "--config", str(config), "--data", str(data), "--run-dir", str(work))
    out = run_logged(cmd, work.parent / f"{work.name}.log", args, "mtkit train")
    lines = (work / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    records = {r["update"]: r for r in map(json.loads, lines) if "tgt_tokens_per_s" in r}
    counts = mtkit_update_tokens(data, args, cfg["seed"])
    first, last = args.warmup, args.warmup + args.updates  # window: updates first+1 .. last
    tokens = {u: counts[u - 1][0] for u in range(first + 1, last + 1)}
    logged = {u: r["tgt_tokens_per_s"] for u, r in records.items()}
    return Result(
        tool=tool,
        round=rnd,
        tokens=tokens,
        seconds=records[last]["elapsed"] - records[first]["elapsed"],
        padded=sum(counts[u - 1][1] for u in tokens),
        own_tok_s=combined_rate(logged, tokens, args.log_every),
        params=int(MTKIT_PARAMS.search(out)[1].replace(",", "")),
    )


MTKIT_PARAMS = re.compile(r"model: ([\d,]+) parameters")


# ---------------------------------------------------------------------------------------------
# Report and main


HEADER = ("round", "tool", "updates", "tgt tok/update", "tgt padding", "tgt tok/s", "tool's own",
          "vs JoeyNMT", "MFU")  # fmt: skip


def table(rows: list[tuple[str, ...]]) -> str:
    """Columns padded to width: the first two left-aligned, numbers right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        pairs = enumerate(zip(row, widths, strict=True))
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in pairs]
        lines.append("  ".join(cells).rstrip())
    return "\n".join([lines[0], "-" * max(map(len, lines)), *lines[1:]])


def report(results: list[Result], flops_per_token: float, peak: float) -> str:
    joey = {r.round: r.tok_s for r in results if r.tool.startswith("JoeyNMT")}
    rows = [HEADER]
    for r in results:
        ratio = f"{r.tok_s / joey[r.round]:.2f}x" if r.round in joey else "-"
        own = f"{r.own_tok_s:,.0f}" if r.own_tok_s else "-"
        mfu = r.tok_s * flops_per_token / peak
        per_update = f"{r.tgt_tokens / len(r.tokens):,.0f}"
        padding = f"{1 - r.tgt_tokens / r.padded:.0%}"
        rows.append((str(r.round), r.tool, str(len(r.tokens)), per_update, padding,
                     f"{r.tok_s:,.0f}", own, ratio, f"{mfu:.1%}"))  # fmt: skip
    mtkit = [r.tok_s for r in results if r.tool == "mtkit"]
    if joey and mtkit:
        total = sum(mtkit) / sum(joey.values())
        rows.append(("all", "mtkit / JoeyNMT", "", "", "", "", "", f"{total:.2f}x", ""))
    lines = [table(rows)]
    fp32 = {r.round: r.tok_s for r in results if r.tool == "mtkit"}
    for r in results:
        if r.tool == "mtkit bf16" and r.round in fp32:
            lines.append(f"round {r.round}: mtkit bf16 / mtkit fp32 {r.tok_s / fp32[r.round]:.2f}x")
    return "\n".join(lines)


NOTES = """\
tgt tok/s: non-padding target tokens (EOS included, BOS not) of the measured updates / wall
  seconds from the start of the first measured update to the start of the one after the last,
  the same definition for both tools. JoeyNMT: start times and batch.ntokens from a probe around
  TrainManager._train_step. mtkit: the window's wall time from the `elapsed` field of its
  metrics.jsonl, its tokens counted by replaying its (deterministic) batch order.
tool's own: what each tool logs itself ("Tokens per Sec" in JoeyNMT's train.log,
  tgt_tokens_per_s in mtkit's metrics.jsonl; both count non-padding target tokens incl. EOS),
  per logging interval, combined time-weighted over the window.
MFU: tgt tok/s x model FLOPs per target token / fp32 matmul peak measured in this run.
batch size: both tools fill batches to {max_tokens} tokens of max(src+1, tgt+1) x sentences
  (JoeyNMT until the first batch at or above it, in random order; mtkit up to it, in length
  buckets), hence the different real tokens per update."""


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
    print(f"\nTraining throughput: Multi30k {SRC}-{TGT} ({VOCAB_SIZE} joint BPE), "
          f"transformer-small, CPU, {args.threads} torch threads, batch {batch} "
          f"tokens, updates {args.warmup + 1}-{args.warmup + args.updates} measured")  # fmt: skip
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; torch {torch_version()}; parameters: "
          + ", ".join(sorted({f"{r.tool} {r.params:,}" for r in results})))  # fmt: skip
    print(report(results, flops_per_token, peak))
    print(f"model FLOPs per target token (training): {flops_per_token / 1e6:.1f} M; fp32 matmul "
          f"peak measured here: {peak / 1e9:.1f} GFLOP/s (best of "
          f"{', '.join(f'{x / 1e9:.1f}' for x in peaks)}: before and after the runs)")  # fmt: skip
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
