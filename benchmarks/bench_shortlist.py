"""Lexical shortlists (`translate --shortlist`): decoding speed and BLEU against the full output
layer, by shortlist size and by how the shortlist was learned (IBM model 1, Dice, eflomal).

Builds shortlists from the training split of ``--data`` (the dataset CKPT was trained on):
``mtkit shortlist build``'s ibm1 and dice at the largest size asked, cut to each smaller one
(:meth:`Shortlist.cut`, what a build of that size writes), and one from eflomal's alignments
(Östling & Tiedemann 2016, in its own virtual environment ``--eflomal-venv``, created once):
the training pairs as sentencepiece pieces, forward and reverse links counted, each source
piece's targets ranked by links (p(t|s) up to a constant), the frequent list as mtkit's.

Then translates Multi30k test_2016_flickr (en, 1,000 lines, mtkit's default batches of 4,096
source tokens) with CKPT, with and without each shortlist, in interleaved rounds (every
setting once per round, in order; figures are medians over rounds), on ``--threads`` (a
list, e.g. 1,2): every shortlist with beam 5 on the first thread count; the baseline and
``--main`` also on the others, and greedy; ``--main`` also with other group sizes
(``--groups``: decoder rows per union, mtkit's default 80) with beam 5 on the first. It prints
sentences/s, the speed-up over the full layer measured in the same rounds, BLEU (sacreBLEU
13a against the reference) and the mean number of target pieces a group's rows are scored
over (K of V); speed-ups are medians of per-round ratios, of wall time ("x full") and of
the process's CPU time ("x CPU s", steadier on a shared machine for one thread).

    .venv/bin/python benchmarks/bench_shortlist.py CKPT --data DATA_DIR [--threads 1,2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from machine import print_machine
from multi30k import DEMO_CHECKPOINT, DEMO_DATA, bleu, existing, read_text

from mtkit.config import TranslateConfig
from mtkit.data.binarized import ParallelData, load_tokenizers
from mtkit.data.lexicon import learn_shortlist, most_frequent, ranked
from mtkit.data.shortlist import Shortlist
from mtkit.engines import load_engine
from mtkit.engines.base import Engine, source_batches
from mtkit.engines.native import NativeEngine
from mtkit.model.shortlisted import group_plan

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".bench" / "shortlist"


# ---------------------------------------------------------------------------------------------
# Shortlists


def eflomal_python(venv: Path) -> Path:
    """The eflomal venv's python (created and filled once, as bench_alignment.py does)."""
    if not (venv / "bin" / "eflomal-align").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "eflomal"], check=True
        )
    return venv / "bin" / "python"


def eflomal_shortlist(data_dir: Path, venv: Path, top_k: int, frequent: int) -> Shortlist:
    """A shortlist from eflomal's forward and reverse links between the training pieces."""
    data = ParallelData(data_dir, "train")
    src_tok, tgt_tok = load_tokenizers(data_dir)
    (src, src_off), (tgt, tgt_off) = data.flat("src"), data.flat("tgt")
    work = WORK / "eflomal"
    work.mkdir(parents=True, exist_ok=True)
    for name, ids, off in (("src.txt", src, src_off), ("tgt.txt", tgt, tgt_off)):
        spans = zip(off[:-1].tolist(), off[1:].tolist(), strict=True)
        lines = [" ".join(map(str, ids[a:b])) + "\n" for a, b in spans]
        (work / name).write_text("".join(lines), encoding="utf-8")
    python = eflomal_python(venv)
    start = time.perf_counter()
    subprocess.run(
        [
            str(python),
            str(venv / "bin" / "eflomal-align"),
            "--overwrite",
            "-s",
            str(work / "src.txt"),
            "-t",
            str(work / "tgt.txt"),
            "-f",
            str(work / "fwd.txt"),
            "-r",
            str(work / "rev.txt"),
        ],
        check=True,
        capture_output=True,
    )
    print(f"eflomal: {len(data)} pairs aligned in {time.perf_counter() - start:.1f} s", flush=True)
    vs, vt = len(src_tok), len(tgt_tok)
    counts = np.zeros(vs * vt, dtype=np.int64)
    for name in ("fwd.txt", "rev.txt"):
        rows = (work / name).read_text(encoding="utf-8").split("\n")
        keys = []
        for i, line in enumerate(rows[: len(data)]):
            s_ids, t_ids = src[src_off[i] : src_off[i + 1]], tgt[tgt_off[i] : tgt_off[i + 1]]
            for link in line.split():
                a, b = link.split("-")
                keys.append(int(s_ids[int(a)]) * vt + int(t_ids[int(b)]))
        np.add.at(counts, np.array(keys, dtype=np.int64), 1)
    seen = np.flatnonzero(counts)
    table = ranked(seen // vt, seen % vt, counts[seen].astype(float), vs, top_k)
    return Shortlist(
        tuple(table),
        most_frequent(tgt, vt, frequent),
        src_tok.sha256,
        tgt_tok.sha256,
        vs,
        vt,
        "eflomal",
        top_k,
    )


def write(shortlist: Shortlist, name: str) -> Path:
    path = WORK / f"{name}.json.gz"
    with path.open("wb") as handle:
        shortlist.write(handle)
    return path


def build_all(args: argparse.Namespace) -> dict[str, Path]:
    """name -> shortlist file: ibm1 at every size, dice and eflomal at ``--compare`` sizes."""
    WORK.mkdir(parents=True, exist_ok=True)
    sizes = [tuple(map(int, s.split("/"))) for s in args.sizes.split(",")]
    compare = [tuple(map(int, s.split("/"))) for s in args.compare.split(",")]
    top = max(k for k, _ in sizes + compare), max(f for _, f in sizes + compare)
    data = ParallelData(args.data, "train")
    src, tgt = load_tokenizers(args.data)
    full: dict[str, Shortlist] = {}
    for method in ("ibm1", "dice"):
        start = time.perf_counter()
        full[method] = learn_shortlist(data, src, tgt, top[0], top[1], method)
        print(f"{method}: built in {time.perf_counter() - start:.1f} s", flush=True)
    if not args.no_eflomal:
        full["eflomal"] = eflomal_shortlist(args.data, args.eflomal_venv, *top)
    files = {}
    for method, shortlist in full.items():
        for k, f in sizes if method == "ibm1" else compare:
            name = f"{method} {k}/{f}"
            files[name] = write(shortlist.cut(k, f), name.replace(" ", "-").replace("/", "-"))
    return files


# ---------------------------------------------------------------------------------------------
# Decoding


@dataclass
class Setting:
    name: str  # "full" or a shortlist's name
    engine: Engine
    beam: int
    threads: int
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # the process's CPU seconds of each run
    outputs: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.name}, beam {self.beam}, {self.threads} thread(s)"

    @property
    def baseline(self) -> tuple[int, int]:
        return self.beam, self.threads


def run(setting: Setting, lines: list[str]) -> None:
    torch.set_num_threads(setting.threads)
    search = setting.engine.config.search.replace(beam=setting.beam)
    setting.engine.translate(lines[:16], search)  # warm-up
    start, cpu = time.perf_counter(), time.process_time()
    results = setting.engine.translate(lines, search)
    setting.seconds.append(time.perf_counter() - start)
    setting.cpu.append(time.process_time() - cpu)
    setting.outputs = [hyps[0].text if hyps else "" for hyps in results]
    print(
        f"  {setting.label:<42} {len(lines) / setting.seconds[-1]:7.1f} sent/s "
        f"({setting.cpu[-1]:.1f} CPU s)",
        flush=True,
    )


def mean_size(engine: NativeEngine, lines: list[str], beam: int) -> float:
    """The mean number of target ids a group of sentences is scored over (per sentence)."""
    assert engine.shortlist is not None
    sources = engine.encode(lines)
    sizes = []
    for batch in source_batches(sources, engine.config.max_tokens):
        rows = [sources[i] for i in batch]
        plan = group_plan(
            engine.shortlist,
            rows,
            engine.tgt_tokenizer.specials,
            torch.device("cpu"),
            max(1, engine.shortlist_rows // beam),
        )
        sizes += [plan.sizes[g] for g in plan.group_of.tolist()]
    return float(np.mean(sizes))


def main(args: argparse.Namespace) -> None:
    print_machine()
    files = build_all(args)
    lines = read_text("test_2016_flickr", "en")[: args.limit]
    refs = read_text("test_2016_flickr", "de")[: len(lines)]
    base = dict(device="cpu", threads=1, max_tokens=args.max_tokens)
    engines: dict[str, Engine] = {
        "full": load_engine([args.checkpoint], TranslateConfig.from_flat(base))
    }
    for name, path in files.items():
        config = TranslateConfig.from_flat({**base, "shortlist": str(path)})
        engines[name] = load_engine([args.checkpoint], config)
    threads = [int(t) for t in args.threads.split(",")]
    main_pair = ("full", args.main)
    settings = [Setting(name, engine, 5, threads[0]) for name, engine in engines.items()]
    settings += [Setting(name, engines[name], 5, t) for t in threads[1:] for name in main_pair]
    settings += [Setting(name, engines[name], 1, t) for t in threads for name in main_pair]
    for group in [int(g) for g in args.groups.split(",") if g]:
        name = f"{args.main} r{group}"
        engines[name] = load_engine([args.checkpoint], engines[args.main].config)
        engines[name].shortlist_rows = group  # type: ignore[attr-defined]
        settings.append(Setting(name, engines[name], 5, threads[0]))
    for r in range(args.rounds):
        print(f"round {r + 1} of {args.rounds}", flush=True)
        for setting in settings:
            run(setting, lines)
        report(settings, engines, lines, refs, r + 1)


def report(
    settings: list[Setting],
    engines: dict[str, Engine],
    lines: list[str],
    refs: list[str],
    rounds: int,
) -> None:
    """The table so far (printed and in .bench/shortlist/results.json)."""
    vocab = engines["full"].tgt_tokenizer.vocab_size
    rows = []
    for s in settings:
        full = next(x for x in settings if x.name == "full" and x.baseline == s.baseline)
        speedup = statistics.median(a / b for a, b in zip(full.seconds, s.seconds, strict=True))
        cpu_speedup = statistics.median(a / b for a, b in zip(full.cpu, s.cpu, strict=True))
        engine = engines[s.name]
        shortlisted = isinstance(engine, NativeEngine) and engine.shortlist is not None
        size = mean_size(engine, lines, s.beam) if shortlisted else float(vocab)  # type: ignore[arg-type]
        rows.append(
            {
                "shortlist": s.name,
                "beam": s.beam,
                "threads": s.threads,
                "sent_s": len(lines) / statistics.median(s.seconds),
                "speedup": speedup,
                "cpu_speedup": cpu_speedup,
                "bleu": bleu(s.outputs, refs),
                "size": size,
                "vocab": vocab,
                "seconds": s.seconds,
                "cpu": s.cpu,
            }
        )
    print(
        f"\n{'shortlist':<18} {'beam':>4} {'thr':>3} {'sent/s':>7} {'x full':>6} "
        f"{'x CPU s':>7} {'BLEU':>6} {'K/group':>8}"
    )
    for row in rows:
        print(
            f"{row['shortlist']:<18} {row['beam']:>4} {row['threads']:>3} {row['sent_s']:7.1f} "
            f"{row['speedup']:6.2f} {row['cpu_speedup']:7.2f} {row['bleu']:6.2f} "
            f"{row['size']:8.0f}"
        )
    (WORK / "results.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(
        f"({rounds} interleaved rounds; per-run seconds in {WORK / 'results.json'})\n", flush=True
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "checkpoint",
        nargs="?",
        default=str(DEMO_CHECKPOINT),
        help="a trained checkpoint (default: `make demo`'s)",
    )
    parser.add_argument("--data", type=Path, default=DEMO_DATA, help="its dataset directory")
    parser.add_argument(
        "--sizes",
        default="50/100,100/200,200/500",
        help="ibm1 shortlists: TOP_K/FREQUENT, comma-separated",
    )
    parser.add_argument(
        "--compare", default="50/100", help="sizes at which ibm1, dice and eflomal are compared"
    )
    parser.add_argument("--main", default="ibm1 50/100", help="also timed greedy")
    parser.add_argument("--groups", default="40,160", help="other rows per group for --main")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--limit", type=int, default=1000, help="lines of the test set")
    parser.add_argument("--max-tokens", type=int, default=4096, help="source tokens per batch")
    parser.add_argument("--eflomal-venv", type=Path, default=ROOT / ".bench" / "venv-eflomal")
    parser.add_argument("--no-eflomal", action="store_true", help="leave eflomal out")
    args = parser.parse_args()
    existing(args.checkpoint, "make demo")
    existing(args.data, "make demo")
    return args


if __name__ == "__main__":
    main(parse_args())
