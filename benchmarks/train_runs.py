"""One measured training run per tool for bench_train.py: JoeyNMT or Eole under its probe, or
`mtkit train` unmodified; each returns the :class:`Result` of its window (updates W+1 .. W+N).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from train_configs import SRC, TGT, eole_config, joeynmt_config, mtkit_config

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


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
# Shared by the runs


def thread_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    return env


def run_logged(cmd: list[str], log: Path, args: argparse.Namespace, what: str) -> str:
    """Run a training command with the benchmark's thread settings; return its output."""
    print(f"  $ {shlex.join(cmd)}", flush=True)
    with open(log, "w") as out:
        proc = subprocess.run(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            check=False,
            env=thread_env(args.threads),
            timeout=args.timeout,
        )
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


def probe_window(probe: Path, args: argparse.Namespace) -> tuple[dict, dict[int, int]]:
    """A peer probe's records by update, and the window's target tokens by update.

    The window runs from the start of update W+1 to the start of update W+N+1, so the run
    makes W+N+1 updates and the probe must have recorded all of W+1 .. W+N+1.
    """
    by_update = {r["update"]: r for r in map(json.loads, probe.read_text().splitlines())}
    first, end = args.warmup + 1, args.warmup + args.updates + 1  # window: [first, end)
    if any(u not in by_update for u in range(first, end + 1)):
        raise RuntimeError(f"{probe}: updates {first}..{end} not all recorded")
    return by_update, {u: by_update[u]["tgt_tokens"] for u in range(first, end)}


def probe_seconds(by_update: dict, args: argparse.Namespace) -> float:
    first, end = args.warmup + 1, args.warmup + args.updates + 1
    return by_update[end]["t"] - by_update[first]["t"]


def probe_result(
    tool: str, rnd: int, probe: Path, args: argparse.Namespace, logged: dict, params: int
) -> Result:
    """A peer's window from its probe's records, with its own logged rates (update -> tok/s)."""
    by_update, tokens = probe_window(probe, args)
    return Result(
        tool=tool,
        round=rnd,
        tokens=tokens,
        seconds=probe_seconds(by_update, args),
        padded=sum(by_update[u]["tgt_padded"] for u in tokens),
        own_tok_s=combined_rate(logged, tokens, args.log_every),
        params=params,
    )


# ---------------------------------------------------------------------------------------------
# JoeyNMT


def joeynmt_run(python: Path, work: Path, data: Path, spm_model: Path, args, rnd: int) -> Result:
    """JoeyNMT under the probe; window figures from the probe's per-update records."""
    work.mkdir(parents=True)
    config = work / "config.yaml"
    config.write_text(yaml.safe_dump(joeynmt_config(work, data, spm_model, args), sort_keys=False))
    probe = work / "probe.jsonl"
    cmd = [str(python), str(HERE / "joeynmt_probe.py"), str(probe), str(args.threads)]
    print(f"[round {rnd}] JoeyNMT", flush=True)
    run_logged([*cmd, "train", str(config), "--skip-test"], work / "stdout.log", args, "JoeyNMT")
    log = (work / "model" / "train.log").read_text(encoding="utf-8")
    logged = {int(m[1]): float(m[2]) for m in JOEY_RATE.finditer(log)}
    return probe_result("JoeyNMT 2.3.0", rnd, probe, args, logged, int(JOEY_PARAMS.search(log)[1]))


JOEY_RATE = re.compile(r"Step:\s+(\d+),.*Tokens per Sec:\s+(\d+)")
JOEY_PARAMS = re.compile(r"Total params:\s+(\d+)")


# ---------------------------------------------------------------------------------------------
# Eole


def prepare_eole(out: Path, data: Path, spm_model: Path) -> Path:
    """The stripped training corpus cut into the same spm model's pieces, space-separated, and
    the pieces as Eole's vocabulary file: what Eole's ``sentencepiece`` transform would make of
    the raw text, done once here, outside the run (as `mtkit prepare` is for mtkit)."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(spm_model))
    out.mkdir(parents=True, exist_ok=True)
    for lang in (SRC, TGT):
        lines = (data / f"train.{lang}").read_text(encoding="utf-8").splitlines()
        pieces = sp.encode(lines, out_type=str)
        (out / f"train.{lang}").write_text("\n".join(map(" ".join, pieces)) + "\n", "utf-8")
    (out / "vocab.txt").write_text((data / "vocab.txt").read_text("utf-8"), "utf-8")
    return out


def eole_run(
    python: Path,
    work: Path,
    data: Path,
    args: argparse.Namespace,
    rnd: int,
    precision: str = "fp32",
) -> Result:
    """``eole train`` under the probe; window figures from the probe's per-update records."""
    from eole_env import EOLE_SPEC

    work.mkdir(parents=True)
    config = work / "config.yaml"
    config.write_text(yaml.safe_dump(eole_config(work, data, args, precision), sort_keys=False))
    probe = work / "probe.jsonl"
    tool = "Eole " + EOLE_SPEC.split("==")[1] + ("" if precision == "fp32" else f" {precision}")
    print(f"[round {rnd}] {tool}", flush=True)
    cmd = [str(python), str(HERE / "eole_probe.py"), str(probe), str(args.threads)]
    out = run_logged([*cmd, "train", "-config", str(config)], work / "stdout.log", args, "Eole")
    logged = {int(m[1]): float(m[2]) for m in EOLE_RATE.finditer(out)}
    return probe_result(tool, rnd, probe, args, logged, int(EOLE_PARAMS.search(out)[1]))


# "Step 20/  121; acc: ...; 1234/1301 tok/s; ..." (source/target non-padding tokens per second)
EOLE_RATE = re.compile(r"Step\s+(\d+)/\s*\d+;.*;\s*\d+/\s*(\d+) tok/s;")
EOLE_PARAMS = re.compile(r"\* number of parameters: (\d+)")


# ---------------------------------------------------------------------------------------------
# mtkit


def mtkit_cmd(*args: str) -> list[str]:
    """`mtkit ...` with this interpreter (the project's venv)."""
    return [sys.executable, "-m", "mtkit", *args]


def prepare_mtkit(out: Path, data: Path, spm_model: Path) -> Path:
    """Binarize the stripped corpus with the same spm model, unfiltered (as JoeyNMT reads it)."""
    options = {
        "--src-lang": SRC,
        "--tgt-lang": TGT,
        "--train": data / "train",
        "--valid": data / "valid",
        "--spm": spm_model,
        "--out-dir": out,
        "--max-tokens": 0,
        "--max-ratio": 0,
    }
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
    work: Path,
    data: Path,
    args: argparse.Namespace,
    rnd: int,
    precision: str = "fp32",
    compile: bool = False,
) -> Result:
    """`mtkit train`; window time from its metrics log, tokens from replaying its batches."""
    config = work.parent / f"{work.name}.yaml"
    cfg = mtkit_config(args, precision, compile)
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    tool = " ".join(
        ["mtkit"] + ([precision] if precision != "fp32" else []) + (["compiled"] if compile else [])
    )
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
