"""Benchmark memory: peak RSS of `mtkit translate` and `mtkit prepare` on inputs far larger than a
chunk, against a documented bound. Both commands stream, so their peak must not grow with the
input: it is set by the model, a chunk of lines and the worker processes.

    python benchmarks/bench_memory.py           # translate 1,000,000 lines; prepare 5,000,000 pairs
    python benchmarks/bench_memory.py --quick   # 50,000 lines and 200,000 pairs
    python benchmarks/bench_memory.py --only translate --lines 200000

Generated inputs (random sentences over a small vocabulary), a tiny random-weight model (with a
sentencepiece model trained on the generated text) and the prepared dataset go to .bench/memory/
(gitignored); inputs are kept for the next run. Each command runs as `python -m mtkit` in a
subprocess; its process tree (prepare's encoding workers included) is sampled from /proc every
20 ms. Reported per command: the peak of the tree's summed RSS (VmRSS; pages that forked workers
share are counted once per process, so this overstates, and a spike shorter than 20 ms can be
missed) and the peak RSS of its largest process (VmHWM, the kernel's exact high-water mark). The
script exits 1 if a tree peak is above its bound (--translate-bound-mb, --prepare-bound-mb).
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / ".bench" / "memory"
EN = (
    "a man woman child dog cat the red blue green big small old young house street park "
    "runs walks sits plays waits looks at on in near with under behind"
).split()
DE = (
    "ein mann frau kind hund katze der rot blau grün groß klein alt jung haus straße park "
    "läuft geht sitzt spielt wartet schaut an auf in nahe mit unter hinter"
).split()
# documented bounds (MiB) for the summed RSS of the command's process tree
TRANSLATE_BOUND_MB = 640
PREPARE_BOUND_MB = 512


def sentence_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` (English, German) word-by-word pairs of 3 to 20 words."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        index = [rng.randrange(len(EN)) for _ in range(rng.randint(3, 20))]
        pairs.append((" ".join(EN[i] for i in index), " ".join(DE[i] for i in index)))
    return pairs


def write_corpus(prefix: Path, pairs: int, sides: tuple[str, ...]) -> None:
    """PREFIX.en (and PREFIX.de) with ``pairs`` lines, written in blocks; kept if present."""
    paths = {side: Path(f"{prefix}.{side}") for side in sides}
    if all(p.is_file() for p in paths.values()):
        return
    handles = {side: open(f"{path}.part", "w", encoding="utf-8") for side, path in paths.items()}
    for start in range(0, pairs, 100_000):
        block = sentence_pairs(min(100_000, pairs - start), seed=start)
        for i, side in enumerate(("en", "de")):
            if side in handles:
                handles[side].write("".join(f"{pair[i]}\n" for pair in block))
    for side, handle in handles.items():
        handle.close()
        os.replace(f"{paths[side]}.part", paths[side])


def tiny_model(directory: Path) -> tuple[Path, Path]:
    """A joint spm model trained on generated text and a random-weight tiny Transformer.

    Built in a subprocess (``--make-model``): torch stays out of this one, which samples.
    """
    spm_path, ckpt_path = directory / "joint.model", directory / "tiny.pt"
    if not (spm_path.is_file() and ckpt_path.is_file()):
        subprocess.run([sys.executable, __file__, "--make-model"], check=True)
    return spm_path, ckpt_path


def make_model(directory: Path) -> None:
    import torch

    from mtkit.checkpoint import Checkpoint
    from mtkit.config import ModelConfig
    from mtkit.data.tokenizer import Tokenizer, train_spm
    from mtkit.model.transformer import build_model

    spm_path, ckpt_path = directory / "joint.model", directory / "tiny.pt"
    if not spm_path.is_file():
        text = [s for pair in sentence_pairs(20_000, seed=-1) for s in pair]
        spm_path.write_bytes(train_spm(text, vocab_size=256))
    if not ckpt_path.is_file():
        vocab = len(Tokenizer(spm_path.read_bytes()))
        cfg = ModelConfig(
            src_vocab_size=vocab,
            tgt_vocab_size=vocab,
            d_model=64,
            ffn_dim=128,
            heads=2,
            encoder_layers=2,
            decoder_layers=2,
            dropout=0.0,
            attention_dropout=0.0,
            share_all_embeddings=True,
        )
        torch.manual_seed(0)
        model = build_model(cfg)
        spm = spm_path.read_bytes()
        tok = Tokenizer(spm)
        Checkpoint.of(model, tok, tok).save(ckpt_path)


def tree_memory(root: int) -> tuple[int, int]:
    """(summed RSS, largest peak RSS so far) in bytes of ``root`` and its descendants.

    From /proc: VmRSS now, and VmHWM, the kernel's high-water mark of each process's RSS.
    """
    members, frontier = {root}, [root]
    while frontier:  # descendants, through each thread's list of children
        pid = frontier.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
            except OSError:
                continue
            frontier.extend(int(c) for c in children if int(c) not in members)
            members.update(int(c) for c in children)
    rss = hwm = 0
    for pid in members:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        kb = {
            k: int(v.split()[0])
            for k, _, v in (line.partition(":") for line in status.splitlines())
            if k in ("VmRSS", "VmHWM")
        }
        rss += kb.get("VmRSS", 0) * 1024
        hwm = max(hwm, kb.get("VmHWM", 0) * 1024)
    return rss, hwm


def measure(args: list[str]) -> tuple[float, int, int]:
    """Run ``python -m mtkit ARGS``; (seconds, peak tree RSS, peak RSS of its largest process)."""
    command = [sys.executable, "-m", "mtkit", *args]
    print(f"$ {shlex.join(command)}", flush=True)
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL)
    tree = largest = 0
    while process.poll() is None:
        rss, hwm = tree_memory(process.pid)
        tree, largest = max(tree, rss), max(largest, hwm)
        time.sleep(0.02)
    if process.returncode != 0:
        raise SystemExit(f"failed with exit code {process.returncode}")
    return time.perf_counter() - start, tree, largest


def report(name: str, size: str, seconds: float, tree: int, largest: int, bound_mb: int) -> bool:
    mib = 1 << 20
    ok = tree <= bound_mb * mib
    print(
        f"{name}: {size} in {seconds:,.0f} s; peak RSS {tree / mib:,.0f} MiB (process tree, "
        f"bound {bound_mb:,} MiB: {'ok' if ok else 'ABOVE'}), largest process "
        f"{largest / mib:,.0f} MiB",
        flush=True,
    )
    return ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lines", type=int, default=1_000_000, help="lines to translate")
    p.add_argument("--pairs", type=int, default=5_000_000, help="sentence pairs to prepare")
    p.add_argument("--quick", action="store_true", help="50,000 lines and 200,000 pairs")
    p.add_argument("--only", choices=["translate", "prepare"], help="measure one command")
    p.add_argument("--beam", type=int, default=2, help="translate: beam width")
    p.add_argument("--workers", type=int, default=2, help="prepare: encoding processes")
    p.add_argument("--translate-bound-mb", type=int, default=TRANSLATE_BOUND_MB)
    p.add_argument("--prepare-bound-mb", type=int, default=PREPARE_BOUND_MB)
    p.add_argument("--make-model", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.make_model:
        make_model(WORK)
        return 0
    lines, pairs = (50_000, 200_000) if args.quick else (args.lines, args.pairs)
    WORK.mkdir(parents=True, exist_ok=True)
    spm, ckpt = tiny_model(WORK)
    ok = True
    if args.only in (None, "translate"):
        source = WORK / f"translate-{lines}"
        write_corpus(source, lines, ("en",))
        out = WORK / "translation.txt"
        seconds, tree, largest = measure(
            [
                "translate",
                "-m",
                str(ckpt),
                "-i",
                f"{source}.en",
                "-o",
                str(out),
                "-q",
                "--beam",
                str(args.beam),
                "--max-len-a",
                "0",
                "--max-len-b",
                "8",
                "--threads",
                "1",
            ]
        )
        out.unlink()
        ok &= report(
            "mtkit translate", f"{lines:,} lines", seconds, tree, largest, args.translate_bound_mb
        )
    if args.only in (None, "prepare"):
        corpus = WORK / f"corpus-{pairs}"
        write_corpus(corpus, pairs, ("en", "de"))
        out = WORK / "prepared"
        seconds, tree, largest = measure(
            [
                "prepare",
                "--train",
                str(corpus),
                "--spm",
                str(spm),
                "-o",
                str(out),
                "--force",
                "--workers",
                str(args.workers),
            ]
        )
        import shutil

        shutil.rmtree(out)
        ok &= report(
            "mtkit prepare", f"{pairs:,} pairs", seconds, tree, largest, args.prepare_bound_mb
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
