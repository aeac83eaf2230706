"""Decoding speed: mtkit against Hugging Face transformers and CTranslate2, same model, same input.

One checkpoint is decoded by these engines on Multi30k test_2016_flickr (en, 1,000 lines), beam
5, on CPU, in batches of 32 sentences:

- mtkit native fp32 (weights packed for oneDNN, the default), fp32 with torch's default matmul
  (``--cpu-matmul default``), bf16 (``--dtype bf16``: bf16 linear layers, packed for oneDNN)
  and int8 (``--quantize int8``: dynamic int8 Linear layers); each of fp32, bf16 and int8 also
  with ``--compile`` (the decoder's step a compiled graph; the library built, or loaded from
  the user cache, when the engine loads, before the timed passes);
- HF transformers ``generate`` on ``mtkit export --format hf`` (MarianMTModel);
- CTranslate2 float32 and int8 on ``mtkit export --format ctranslate2``; with more than one
  thread also split into inter_threads=T, intra_threads=1 (T batches decoded at once, one
  thread each) beside its default of one batch at a time on T intra-op threads; mtkit fp32, bf16
  and int8 likewise (``--workers T --threads 1``: T worker processes);
- mtkit ``--engine ctranslate2`` on those two exports (mtkit's tokenization and batching).

Every engine runs at each thread count of ``--threads`` (default 1,2: a per-core figure and the
whole of a 2-core machine); the report gives a table per thread count, each engine's best
thread setting, and the ratios between engines at equal threads and at their bests. The output
starts with the CPU and its flags (avx2, avx512f, avx512_bf16, amx_bf16, amx_int8).

Every engine runs in a fresh process of its own (a subprocess of this very file), so no engine
inherits another's thread pools: mtkit's in this venv, the peers in theirs.

The peers run in their own virtual environment, ``.bench/venv-engines`` (torch of this
interpreter's version installed first, so pip takes the local CPU wheel; then transformers,
ctranslate2, sentencepiece and sacrebleu of the versions installed here), as subprocesses of
this very file in ``--peer`` mode, which imports nothing from mtkit. Exports run in this venv.

Each engine decodes the test set ``--repeat`` times and the fastest pass counts (the machine
may be shared with other work; the best pass is the least disturbed). Fairness: every engine
gets the same batches (lines sorted by length, cut into groups of
``--batch``), the same thread count, beam, length penalty (fairseq style: score / len**lenpen,
len counting EOS) and minimum length. Timing starts after the model is loaded and one warm-up
batch, and covers tokenization, search and detokenization of every batch. Target tokens are the
tokens each engine generated, EOS included. mtkit bounds each sentence's length by
max_len_a * source pieces + max_len_b; the peers only take one bound per call, so they get the
largest of their batch (slightly more room; rarely used by a trained model).

Without a checkpoint, a random transformer-small (d=256, 3+3 layers, joint 8k spm trained on
Multi30k train) is built, and every engine is forced to emit exactly ``--random-len`` tokens
(min_len = max_len): raw speed only, BLEU meaningless.

    .venv/bin/python benchmarks/bench_engines.py [CKPT] [--limit N] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from engines_env import BENCH_DIR, ensure_venv
from engines_report import agreement, report
from engines_runs import peer_ct2, peer_hf, run_mtkit, run_mtkit_ct2
from multi30k import random_checkpoint, read_text

WORK = BENCH_DIR / "engines"


def peer_main(args: argparse.Namespace) -> None:
    """``--peer`` mode: one engine of engines_runs.py in this process; its result to a file."""
    job = json.loads(Path(args.job).read_text(encoding="utf-8"))
    model_dir, batches, opts = job["model_dir"], job["batches"], job["opts"]
    ckpt = Path(job["checkpoint"])
    engines = {
        "hf": lambda: peer_hf(model_dir, batches, opts),
        "ct2": lambda: peer_ct2(model_dir, batches, opts),
        "mtkit": lambda: run_mtkit(ckpt, batches, opts, "", "onednn"),
        "mtkit-torch-matmul": lambda: run_mtkit(ckpt, batches, opts, "", "default"),
        "mtkit-bf16": lambda: run_mtkit(ckpt, batches, opts, "", "onednn", "bf16"),
        "mtkit-int8": lambda: run_mtkit(ckpt, batches, opts, "int8", "onednn"),
        "mtkit-compiled": lambda: run_mtkit(ckpt, batches, opts, "", "onednn", compile=True),
        "mtkit-bf16-compiled": lambda: run_mtkit(
            ckpt, batches, opts, "", "onednn", "bf16", compile=True
        ),
        "mtkit-int8-compiled": lambda: run_mtkit(
            ckpt, batches, opts, "int8", "onednn", compile=True
        ),
        "mtkit-ct2": lambda: run_mtkit_ct2(ckpt, Path(model_dir), batches, opts),
    }
    outputs, tokens, seconds = engines[args.peer]()
    result = {"outputs": outputs, "tokens": tokens, "seconds": seconds}  # seconds: per pass
    Path(args.result).write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")


def export_all(ckpt: Path) -> dict[str, Path]:
    """HF and CTranslate2 (float32, int8) exports of ``ckpt``, cached by its content hash; a
    format the model cannot be exported to is left out, with the exporter's reason printed
    (a rotary model has no HF Marian export: its HF row is skipped)."""
    from mtkit.errors import MtkitError
    from mtkit.export.ct2 import export_ct2
    from mtkit.export.hf import export_hf

    digest = hashlib.sha256(ckpt.read_bytes()).hexdigest()[:12]
    base = WORK / f"export-{digest}"
    exporters = {"hf": lambda out: export_hf(ckpt, out)}
    for q in ("float32", "int8"):
        exporters[f"ct2-{q}"] = lambda out, q=q: export_ct2(ckpt, out, quantization=q)
    dirs = {}
    for name, export in exporters.items():
        out = base / name
        try:
            if not out.is_dir():
                export(out)
        except MtkitError as err:
            print(f"no {name} export, its rows skipped: {err}", flush=True)
            continue
        dirs[name] = out
    return dirs


def make_batches(lines: list[str], ckpt: Path, size: int) -> tuple[list[list[str]], list[int]]:
    """Lines sorted by source length (longest first), in groups of ``size``; and the order."""
    from mtkit.checkpoint import Checkpoint

    src, _ = Checkpoint.load(ckpt).tokenizers()
    lengths = [len(ids) for ids in src.encode(lines)]
    order = sorted(range(len(lines)), key=lambda i: -lengths[i])
    ordered = [lines[i] for i in order]
    return [ordered[i : i + size] for i in range(0, len(ordered), size)], order


def run_peer(python: Path, engine: str, model_dir: Path | None, batches, opts: dict, ckpt: Path):
    """One engine in a fresh process: ``python`` runs this file in ``--peer engine`` mode."""
    tag = f"{engine}-{opts['threads']}x{opts.get('inter', 1)}"
    job, result = WORK / f"job-{tag}.json", WORK / f"result-{tag}.json"
    job.write_text(
        json.dumps(
            {"model_dir": str(model_dir), "batches": batches, "opts": opts, "checkpoint": str(ckpt)}
        )
    )
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        OMP_NUM_THREADS=str(opts["threads"]),
        TOKENIZERS_PARALLELISM="false",
    )
    cmd = [str(python), __file__, "--peer", engine, "--job", str(job), "--result", str(result)]
    subprocess.run(cmd, check=True, env=env)
    data = json.loads(result.read_text(encoding="utf-8"))
    return data["outputs"], data["tokens"], data["seconds"]


EXPORTED = ("hf", "ct2", "mtkit-ct2")  # the engines that read an export


def jobs_for(threads: int, python: Path, dirs: dict[str, Path]) -> list[tuple]:
    """(row name, interpreter, engine, exported model, inter_threads) at ``threads`` threads."""
    ours = Path(sys.executable)
    jobs = [
        ("mtkit fp32", ours, "mtkit", None, 1),
        ("mtkit fp32 torch matmul", ours, "mtkit-torch-matmul", None, 1),
        ("mtkit bf16", ours, "mtkit-bf16", None, 1),
        ("mtkit int8", ours, "mtkit-int8", None, 1),
        ("mtkit fp32 compiled", ours, "mtkit-compiled", None, 1),
        ("mtkit bf16 compiled", ours, "mtkit-bf16-compiled", None, 1),
        ("mtkit int8 compiled", ours, "mtkit-int8-compiled", None, 1),
        ("HF transformers", python, "hf", dirs.get("hf"), 1),
        ("CTranslate2 float32", python, "ct2", dirs.get("ct2-float32"), 1),
        ("CTranslate2 int8", python, "ct2", dirs.get("ct2-int8"), 1),
        ("mtkit ct2 float32", ours, "mtkit-ct2", dirs.get("ct2-float32"), 1),
        ("mtkit ct2 int8", ours, "mtkit-ct2", dirs.get("ct2-int8"), 1),
    ]
    if threads > 1:  # the other use of T threads: T batches at once, one thread each
        jobs += [
            (f"mtkit {q}", ours, engine, None, threads)
            for q, engine in (
                ("fp32", "mtkit"),
                ("bf16", "mtkit-bf16"),
                ("int8", "mtkit-int8"),
                ("fp32 compiled", "mtkit-compiled"),
                ("bf16 compiled", "mtkit-bf16-compiled"),
                ("int8 compiled", "mtkit-int8-compiled"),
            )
        ]
        jobs += [
            (f"CTranslate2 {q}", python, "ct2", dirs.get(f"ct2-{q}"), threads)
            for q in ("float32", "int8")
        ]
    # a peer row whose export is missing (export_all said why) is left out
    return [job for job in jobs if job[2] not in EXPORTED or job[3] is not None]


def main(args: argparse.Namespace) -> None:
    import sacrebleu
    from machine import print_machine  # mtkit's CPU reading: never in peer processes

    print_machine()
    random_model = args.checkpoint is None
    ckpt = Path(args.checkpoint) if args.checkpoint else random_checkpoint(WORK)
    lines, refs = read_text("test_2016_flickr", "en"), read_text("test_2016_flickr", "de")
    lines, refs = lines[: args.limit or None], refs[: args.limit or None]
    from mtkit.checkpoint import Checkpoint

    max_positions = Checkpoint.load(ckpt).model_config.max_positions
    forced = dict(max_len_a=0.0, max_len_b=args.random_len, min_len=args.random_len)
    base = dict(
        repeat=args.repeat,
        beam=args.beam,
        lenpen=args.lenpen,
        max_positions=max_positions,
        **(forced if random_model else dict(max_len_a=1.2, max_len_b=10, min_len=1)),
    )
    dirs = export_all(ckpt)
    python = ensure_venv()
    batches, order = make_batches(lines, ckpt, args.batch)
    print(
        f"{ckpt}: {len(lines)} lines, batches of {args.batch}, beam {args.beam}, threads "
        f"{', '.join(map(str, args.threads))}",
        flush=True,
    )
    rows = []
    for threads in args.threads:
        for name, interpreter, engine, model_dir, inter in jobs_for(threads, python, dirs):
            if args.engines and not any(e in name.lower() for e in args.engines):
                continue
            opts = dict(base, threads=threads, inter=inter)
            load = os.getloadavg()[0]
            out, tokens, passes = run_peer(interpreter, engine, model_dir, batches, opts, ckpt)
            seconds = min(passes)
            hyps = [""] * len(lines)
            for i, text in zip(order, out, strict=True):
                hyps[i] = text
            bleu = sacrebleu.corpus_bleu(hyps, [refs]).score
            setting = f"{threads}" if inter == 1 else f"{inter}x{threads // inter}"
            rows.append(
                dict(
                    engine=name,
                    threads=threads,
                    setting=setting,
                    inter=inter,
                    sent_s=len(lines) / seconds,
                    tok_s=tokens / seconds,
                    bleu=bleu,
                    seconds=seconds,
                    passes=passes,
                    tokens=tokens,
                    load=load,
                    hyps=hyps,
                )
            )
            print(
                f"  {name} [{setting}]: {tokens / seconds:.0f} tok/s, BLEU {bleu:.1f} "
                f"(load average {load:.1f} at its start)",
                flush=True,
            )
    print(report(rows, random_model))
    for a, b in (
        ("mtkit fp32", "mtkit bf16"),
        ("mtkit fp32", "mtkit fp32 compiled"),
        ("mtkit bf16", "mtkit bf16 compiled"),
        ("mtkit int8", "mtkit int8 compiled"),
    ):
        same = agreement(rows, a, b)
        if same:
            print(same)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    for r in rows:
        del r["hyps"]
    (WORK / "results.json").write_text(
        json.dumps({"checkpoint": str(ckpt), "opts": base, "rows": rows}, indent=2)
    )


def thread_counts(text: str) -> list[int]:
    counts = [int(x) for x in text.split(",") if x.strip()]
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"thread counts, e.g. 1,2 (got {text!r})")
    return counts


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", nargs="?", help="trained mtkit checkpoint (default: random)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--lenpen", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=32, help="sentences per batch")
    p.add_argument("--threads", type=thread_counts, default=[1, 2], help="e.g. 1,2 (each)")
    p.add_argument("--limit", type=int, default=0, help="first N test lines only (0: all)")
    p.add_argument("--repeat", type=int, default=3, help="timed passes per engine (best kept)")
    p.add_argument("--random-len", type=int, default=16, help="forced output length (random)")
    p.add_argument("--engines", nargs="*", help="substrings: mtkit, hf, ctranslate2, int8 ...")
    p.add_argument("--peer", help=argparse.SUPPRESS)  # an engine of peer_main, in a subprocess
    p.add_argument("--job", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    return p.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    if arguments.peer:
        peer_main(arguments)
    else:
        main(arguments)
