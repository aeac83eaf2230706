"""Decoding speed: mtkit against Hugging Face transformers and CTranslate2, same model, same input.

One checkpoint is decoded by these engines on Multi30k test_2016_flickr (en, 1,000 lines), beam
5, on CPU, in batches of 32 sentences:

- mtkit native fp32 (weights packed for oneDNN, the default), fp32 with torch's default matmul
  (``--cpu-matmul default``), bf16 (``--dtype bf16``: bf16 linear layers, packed for oneDNN)
  and int8 (``--quantize int8``: dynamic int8 Linear layers);
- HF transformers ``generate`` on ``mtkit export --format hf`` (MarianMTModel);
- CTranslate2 float32 and int8 on ``mtkit export --format ctranslate2``; with more than one
  thread also split into inter_threads=T, intra_threads=1 (T batches decoded at once, one
  thread each) beside its default of one batch at a time on T intra-op threads;
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
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from multi30k import random_checkpoint, read_text

if TYPE_CHECKING:
    from mtkit.config import TranslateConfig

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / ".bench"
VENV = BENCH_DIR / "venv-engines"
WORK = BENCH_DIR / "engines"
PEER_PACKAGES = ("transformers", "ctranslate2", "sentencepiece", "sacrebleu")
PAD, BOS, EOS = 0, 2, 3


# ---------------------------------------------------------------------------------------------
# Peer mode: one engine per process (HF and CTranslate2 inside .bench/venv-engines, mtkit in
# its own venv); stdlib imports only at module level


def _generated_length(row: list[int]) -> int:
    """Tokens a sequence holds up to its first EOS, EOS included: HF's beam search pads finished
    hypotheses with EOS (not PAD), which must not count as generated tokens."""
    return row.index(EOS) + 1 if EOS in row else sum(1 for t in row if t != PAD)


def _bound(lengths: list[int], opts: dict) -> int:
    """The largest per-sentence length bound of a batch of sources of ``lengths`` pieces."""
    longest = max(lengths)
    bound = int(opts["max_len_a"] * longest + opts["max_len_b"])
    return min(max(bound, opts["min_len"]), opts["max_positions"] - 1)


def peer_hf(model_dir: str, batches: list[list[str]], opts: dict) -> tuple[list, int, float]:
    import warnings

    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
    from transformers.utils import logging

    logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")
    torch.set_num_threads(opts["threads"])
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)

    def run(batch: list[str]) -> tuple[list[str], int]:
        enc = tok(
            batch,
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=opts["max_positions"],
        )  # as mtkit: pieces + EOS fit the positions
        bound = _bound((enc["attention_mask"].sum(1) - 1).tolist(), opts)  # pieces, no EOS
        with torch.inference_mode():
            out = model.generate(**enc, num_beams=opts["beam"], length_penalty=opts["lenpen"],
                                 early_stopping=True, max_length=bound + 2,
                                 min_new_tokens=opts["min_len"], do_sample=False)  # fmt: skip
        tokens = sum(_generated_length(row) for row in out[:, 1:].tolist())
        return tok.batch_decode(out, skip_special_tokens=True), tokens

    return _timed(run, batches, opts["repeat"])


def peer_ct2(model_dir: str, batches: list[list[str]], opts: dict) -> tuple[list, int, float]:
    import ctranslate2
    import sentencepiece as spm

    src = spm.SentencePieceProcessor(model_file=f"{model_dir}/source.spm")
    tgt = spm.SentencePieceProcessor(model_file=f"{model_dir}/target.spm")
    inter = opts.get("inter", 1)  # batches decoded at once, intra_threads each
    translator = ctranslate2.Translator(model_dir, device="cpu", compute_type="default",
                                        inter_threads=inter,
                                        intra_threads=opts["threads"] // inter)  # fmt: skip

    def submit(batch: list[str]):
        pieces = [p[: opts["max_positions"] - 1] for p in src.encode(batch, out_type=str)]
        bound = _bound([len(p) for p in pieces], opts)
        return translator.translate_batch(
            pieces, beam_size=opts["beam"], length_penalty=opts["lenpen"],
            max_decoding_length=bound + 1, min_decoding_length=opts["min_len"],
            return_end_token=True, max_input_length=0, suppress_sequences=[["<pad>"], ["<s>"]],
            asynchronous=inter > 1,
        )  # fmt: skip

    def texts_tokens(results) -> tuple[list[str], int]:
        hyps = [r.hypotheses[0] for r in results]
        texts = [tgt.decode([p for p in h if p != "</s>"]) for h in hyps]
        return texts, sum(len(h) for h in hyps)

    def run_all(todo: list[list[str]]) -> tuple[list[str], int]:
        """Every batch submitted at once, so the ``inter`` workers each take one."""
        outputs, tokens = [], 0
        for pending in [submit(batch) for batch in todo]:
            texts, n = texts_tokens([r.result() for r in pending])
            outputs.extend(texts)
            tokens += n
        return outputs, tokens

    if inter > 1:
        return _timed_all(run_all, batches, opts["repeat"])
    return _timed(lambda batch: texts_tokens(submit(batch)), batches, opts["repeat"])


def _timed(run, batches: list[list[str]], repeat: int) -> tuple[list[str], int, list[float]]:
    """Outputs, generated tokens, and the seconds of each of ``repeat`` passes of ``run`` over
    all batches, after one warm-up batch. (The machine may be shared: report the best pass.)"""

    def run_all(todo: list[list[str]]) -> tuple[list[str], int]:
        outputs, tokens = [], 0
        for batch in todo:
            texts, n = run(batch)
            outputs.extend(texts)
            tokens += n
        return outputs, tokens

    return _timed_all(run_all, batches, repeat)


def _timed_all(run_all, batches: list[list[str]], repeat: int):
    """``run_all`` (all batches in one call) timed ``repeat`` times after a warm-up batch."""
    run_all([batches[0][:4]])
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        outputs, tokens = run_all(batches)
        seconds.append(time.perf_counter() - start)
    return outputs, tokens, seconds


def peer_main(args: argparse.Namespace) -> None:
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
        "mtkit-ct2": lambda: run_mtkit_ct2(ckpt, Path(model_dir), batches, opts),
    }
    outputs, tokens, seconds = engines[args.peer]()
    result = {"outputs": outputs, "tokens": tokens, "seconds": seconds}  # seconds: per pass
    Path(args.result).write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Orchestrator: runs in mtkit's venv


def installed_versions() -> dict[str, str]:
    """The peer packages' versions in this venv (so both venvs decode with the same code)."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for name in ("torch", *PEER_PACKAGES):
        try:
            versions[name] = version(name).split("+")[0]
        except PackageNotFoundError:
            sys.exit(f"{name} is missing here: make install (it installs mtkit[hf,ct2])")
    return versions


def ensure_venv() -> Path:
    """Create .bench/venv-engines once (a stamp records what it holds); return its python."""
    import fcntl

    python = VENV / "bin" / "python"
    wanted = installed_versions()
    stamp = VENV / ".bench-installed.json"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / f"{VENV.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and python.exists() and json.loads(stamp.read_text()) == wanted:
            return python
        print(f"creating {VENV}: {wanted}", flush=True)
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        torch_args = shlex.split(os.environ.get("TORCH_PIP_ARGS", ""))
        subprocess.run([*pip, *torch_args, f"torch=={wanted['torch']}"], check=True)
        specs = [f"{name}=={wanted[name]}" for name in PEER_PACKAGES]
        subprocess.run([*pip, *specs, f"torch=={wanted['torch']}"], check=True)
        stamp.write_text(json.dumps(wanted))
    return python


def export_all(ckpt: Path) -> dict[str, Path]:
    """HF and CTranslate2 (float32, int8) exports of ``ckpt``, cached by its content hash."""
    from mtkit.export.ct2 import export_ct2
    from mtkit.export.hf import export_hf

    digest = hashlib.sha256(ckpt.read_bytes()).hexdigest()[:12]
    base = WORK / f"export-{digest}"
    dirs = {"hf": base / "hf", "ct2-float32": base / "ct2-float32", "ct2-int8": base / "ct2-int8"}
    if not dirs["hf"].is_dir():
        export_hf(ckpt, dirs["hf"])
    for q in ("float32", "int8"):
        if not dirs[f"ct2-{q}"].is_dir():
            export_ct2(ckpt, dirs[f"ct2-{q}"], quantization=q)
    return dirs


def make_batches(lines: list[str], ckpt: Path, size: int) -> tuple[list[list[str]], list[int]]:
    """Lines sorted by source length (longest first), in groups of ``size``; and the order."""
    from mtkit.checkpoint import load_checkpoint
    from mtkit.data.tokenizer import Tokenizer

    src = Tokenizer(load_checkpoint(ckpt)["spm"]["src"])
    lengths = [len(ids) for ids in src.encode(lines)]
    order = sorted(range(len(lines)), key=lambda i: -lengths[i])
    ordered = [lines[i] for i in order]
    return [ordered[i : i + size] for i in range(0, len(ordered), size)], order


def engine_config(opts: dict, **runtime) -> TranslateConfig:
    """The benchmark's search options; max_tokens so large that every engine decodes the same
    batches (no further splitting)."""
    from mtkit.config import SearchConfig, TranslateConfig

    search = SearchConfig(beam=opts["beam"], lenpen=opts["lenpen"], max_len_a=opts["max_len_a"],
                          max_len_b=opts["max_len_b"], min_len=opts["min_len"])  # fmt: skip
    return TranslateConfig(search, device="cpu", threads=opts["threads"], max_tokens=10**9,
                           **runtime)  # fmt: skip


def run_engine(engine, batches: list[list[str]], opts: dict):
    """Time ``engine`` (mtkit's protocol) on ``batches``; tokens generated, EOS included."""

    def run(batch: list[str]) -> tuple[list[str], int]:
        results = engine.translate(batch)
        texts = [hyps[0].text if hyps else "" for hyps in results]
        return texts, sum(hyps[0].tokens + 1 for hyps in results if hyps)

    return _timed(run, batches, opts["repeat"])


def run_mtkit(
    ckpt: Path, batches: list[list[str]], opts: dict, quantize: str, matmul: str, dtype="fp32"
):
    from mtkit.engines import load_engine

    cfg = engine_config(opts, quantize=quantize, cpu_matmul=matmul, dtype=dtype)
    return run_engine(load_engine([str(ckpt)], cfg), batches, opts)


def run_mtkit_ct2(ckpt: Path, model_dir: Path, batches: list[list[str]], opts: dict):
    """`mtkit translate --engine ctranslate2` (its library function) on the same batches:
    mtkit's tokenization, length limits and batching around CTranslate2, in this process."""
    from mtkit.engines import load_engine

    cfg = engine_config(opts, engine="ctranslate2")
    return run_engine(load_engine([str(model_dir)], cfg), batches, opts)


def run_peer(python: Path, engine: str, model_dir: Path | None, batches, opts: dict, ckpt: Path):
    """One engine in a fresh process: ``python`` runs this file in ``--peer engine`` mode."""
    tag = f"{engine}-{opts['threads']}x{opts.get('inter', 1)}"
    job, result = WORK / f"job-{tag}.json", WORK / f"result-{tag}.json"
    job.write_text(json.dumps({"model_dir": str(model_dir), "batches": batches, "opts": opts,
                               "checkpoint": str(ckpt)}))  # fmt: skip
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               OMP_NUM_THREADS=str(opts["threads"]), TOKENIZERS_PARALLELISM="false")  # fmt: skip
    cmd = [str(python), __file__, "--peer", engine, "--job", str(job), "--result", str(result)]
    subprocess.run(cmd, check=True, env=env)
    data = json.loads(result.read_text(encoding="utf-8"))
    return data["outputs"], data["tokens"], data["seconds"]


OURS = ("mtkit fp32", "mtkit bf16", "mtkit int8")
PEERS = ("CTranslate2 float32", "CTranslate2 int8", "HF transformers")


def _table(rows: list[dict]) -> list[str]:
    lines = [f"{'engine':<24} {'threads':<8} {'sent/s':>8} {'tok/s':>8} {'BLEU':>6}  "
             f"{'seconds':>7}  passes"]  # fmt: skip
    for r in rows:
        passes = " ".join(f"{s:.1f}" for s in r["passes"])
        lines.append(f"{r['engine']:<24} {r['setting']:<8} {r['sent_s']:8.1f} {r['tok_s']:8.0f} "
                     f"{r['bleu']:6.1f}  {r['seconds']:7.1f}  {passes}")  # fmt: skip
    return lines


def best_rates(rows: list[dict], threads: int | None = None) -> dict[str, dict]:
    """Each engine's fastest row (at ``threads`` total threads only, when given)."""
    best: dict[str, dict] = {}
    for r in rows:
        if threads is not None and r["threads"] != threads:
            continue
        if r["engine"] not in best or r["tok_s"] > best[r["engine"]]["tok_s"]:
            best[r["engine"]] = r
    return best


def _ratios(best: dict[str, dict], label: str) -> list[str]:
    lines = []
    rate = {name: r["tok_s"] for name, r in best.items()}
    pairs = [(a, b) for a in OURS for b in PEERS]
    pairs += [("mtkit bf16", "mtkit fp32"), ("mtkit fp32", "mtkit fp32 torch matmul")]
    pairs += [(f"mtkit ct2 {q}", f"CTranslate2 {q}") for q in ("float32", "int8")]
    for ours, peer in pairs:
        if ours in rate and peer in rate:
            how = "" if label else f" ({best[ours]['setting']} vs {best[peer]['setting']})"
            lines.append(f"  {ours} / {peer}: {rate[ours] / rate[peer]:.2f}x{how}")
    return [f"ratios {label or 'at each engine best'} (target tok/s):", *lines]


def report(rows: list[dict], random_model: bool) -> str:
    """A table per thread count, each engine's best setting, and ratios at equal threads (the
    peer at its better split of those threads) and between bests."""
    lines: list[str] = []
    counts = sorted({r["threads"] for r in rows})
    for t in counts:
        title = f"-- {t} thread{'s' if t > 1 else ''}"
        lines += [title, *_table([r for r in rows if r["threads"] == t])]
    best = best_rates(rows)
    lines += ["-- each engine at its best thread setting", *_table(list(best.values()))]
    for t in counts:
        lines += _ratios(best_rates(rows, t), f"at {t} thread{'s' if t > 1 else ''}")
    lines += _ratios(best, "")
    bleu = {r["engine"]: r["bleu"] for r in rows}
    for other in ("mtkit bf16", "mtkit ct2 int8"):
        if other in bleu and "mtkit fp32" in bleu:
            lines.append(f"BLEU of {other} - mtkit fp32: {bleu[other] - bleu['mtkit fp32']:+.2f}")
    if random_model:
        lines.append("random model, outputs forced to equal length: BLEU is meaningless")
    return "\n".join(lines)


def agreement(rows: list[dict], a: str, b: str) -> str | None:
    """How many outputs of engines ``a`` and ``b`` are equal (first row of each)."""
    first = {}
    for r in rows:
        first.setdefault(r["engine"], r["hyps"])
    if a not in first or b not in first:
        return None
    same = sum(x == y for x, y in zip(first[a], first[b], strict=True))
    return f"{a} and {b}: {same}/{len(first[a])} outputs equal ({same / len(first[a]):.1%})"


def jobs_for(threads: int, python: Path, dirs: dict[str, Path]) -> list[tuple]:
    """(row name, interpreter, engine, exported model, inter_threads) at ``threads`` threads."""
    ours = Path(sys.executable)
    jobs = [
        ("mtkit fp32", ours, "mtkit", None, 1),
        ("mtkit fp32 torch matmul", ours, "mtkit-torch-matmul", None, 1),
        ("mtkit bf16", ours, "mtkit-bf16", None, 1),
        ("mtkit int8", ours, "mtkit-int8", None, 1),
        ("HF transformers", python, "hf", dirs["hf"], 1),
        ("CTranslate2 float32", python, "ct2", dirs["ct2-float32"], 1),
        ("CTranslate2 int8", python, "ct2", dirs["ct2-int8"], 1),
        ("mtkit ct2 float32", ours, "mtkit-ct2", dirs["ct2-float32"], 1),
        ("mtkit ct2 int8", ours, "mtkit-ct2", dirs["ct2-int8"], 1),
    ]
    if threads > 1:  # CTranslate2's other use of T threads: T batches at once, one thread each
        jobs += [(f"CTranslate2 {q}", python, "ct2", dirs[f"ct2-{q}"], threads)
                 for q in ("float32", "int8")]  # fmt: skip
    return jobs


def main(args: argparse.Namespace) -> None:
    import sacrebleu
    from machine import print_machine  # mtkit's CPU reading: never in peer processes

    print_machine()
    random_model = args.checkpoint is None
    ckpt = Path(args.checkpoint) if args.checkpoint else random_checkpoint(WORK)
    lines, refs = read_text("test_2016_flickr", "en"), read_text("test_2016_flickr", "de")
    lines, refs = lines[: args.limit or None], refs[: args.limit or None]
    from mtkit.checkpoint import load_checkpoint

    max_positions = load_checkpoint(ckpt)["model_config"].get("max_positions", 1024)
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
    print(f"{ckpt}: {len(lines)} lines, batches of {args.batch}, beam {args.beam}, threads "
          f"{', '.join(map(str, args.threads))}", flush=True)  # fmt: skip
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
            rows.append(dict(engine=name, threads=threads, setting=setting, inter=inter,
                             sent_s=len(lines) / seconds, tok_s=tokens / seconds, bleu=bleu,
                             seconds=seconds, passes=passes, tokens=tokens, load=load,
                             hyps=hyps))  # fmt: skip
            print(f"  {name} [{setting}]: {tokens / seconds:.0f} tok/s, BLEU {bleu:.1f} "
                  f"(load average {load:.1f} at its start)", flush=True)  # fmt: skip
    print(report(rows, random_model))
    same = agreement(rows, "mtkit fp32", "mtkit bf16")
    if same:
        print(same)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    for r in rows:
        del r["hyps"]
    (WORK / "results.json").write_text(json.dumps({"checkpoint": str(ckpt), "opts": base,
                                                   "rows": rows}, indent=2))  # fmt: skip


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
