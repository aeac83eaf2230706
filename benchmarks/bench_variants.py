"""Which Transformer variants help MT: the `make demo` budget for every variant (issue 13).

Each variant of benchmarks/variants.py is trained on the shipped Multi30k en-de with exactly the
`make demo` set-up (the recipe's spm and prepare stages, recipes/multi30k/demo.yaml: 480 s of
training on 2 threads) plus its `--set model.*` overrides, then test_2016_flickr is translated
with beam 5 and scored. Per variant and seed one JSON line goes to ``--results`` (default
benchmarks/results/variants.jsonl, committed), so the whole table can be built over several
sittings: a (variant, seed) already in the file is skipped, and a run directory left by an
interrupted sitting resumes where it stopped (`mtkit train` resumes exactly).

A row holds: parameters; updates reached; training target tokens/s (the mean of the run's
logged rates); beam-5 decoding target tokens/s of `mtkit translate` on the test set (wall
clock, EOS included); decoding state per sentence (30 source tokens, 30 steps, beam 5); BLEU
and chrF with sacrebleu's signatures; and the same scores at the baseline's update count
(``equal_updates``): each non-baseline run saves a checkpoint at that update (``save_every``),
and a run that did not reach it within the budget is resumed without a time limit until it
does, so speed and sample-efficiency are told apart. The CPU, its flags and the load average
are recorded with every row, and the training process's CPU seconds over (budget x threads)
as ``cpu_share`` (a row whose share is well below the baseline's was trained on a busy machine:
run it again with ``--rerun``). Timings are only comparable within one sitting: the report gives
ratios to the baseline of the same seed.

On a machine that other work shares, the clock budget is emulated instead (``--speeds``): each
variant trains exactly the updates 480 s buy it on a quiet machine, the baseline's quiet count
(``--base-updates``, default its seed-1 row) times the variant's training speed ratio from
``bench_variant_speed.py --json`` (tokens per CPU-second, which load hardly changes). Those rows
are deterministic (the same weights whatever the load) and go to results/variants-emulated.jsonl;
their speed columns are the --speeds figures. A run trained on the clock before resumes to its
update budget (mtkit's resume is exact).

How a gain depends on training length (issue 30): ``--updates N`` trains every variant exactly N
updates (no clock, no emulation; e.g. 3,000, five times the demo's), in run directories of their
own, into results/variants-N-updates.jsonl; deterministic and resumable like the emulated rows
(a checkpoint every 250 updates), so the 1-2 h runs (2 CPU cores) can be spread over sittings
or run on a GPU machine; their rows are scored on the validation set as well (val BLEU), so
one test set does not decide.

    .venv/bin/python benchmarks/bench_variants.py                      # every variant, seed 1
    .venv/bin/python benchmarks/bench_variants.py --only rope,alibi --seeds 1,2,3
    .venv/bin/python benchmarks/bench_variants.py --report             # the table so far
    .venv/bin/python benchmarks/bench_variants.py --markdown           # as README.md has it
    .venv/bin/python benchmarks/bench_variants.py --speeds benchmarks/results/variant_speed.json
    .venv/bin/python benchmarks/bench_variants.py --updates 3000 --only rope,modern --seeds 1,2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine_lines  # noqa: E402
from variants import BASELINE, TRAIN_SETTINGS, VARIANTS, set_args  # noqa: E402
from variants_report import markdown, report  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "multi30k"
WORK = ROOT / ".bench" / "variants"
RESULTS = Path(__file__).resolve().parent / "results" / "variants.jsonl"
EMULATED = RESULTS.with_name("variants-emulated.jsonl")
TEST = "test_2016_flickr"
VALID = "val"  # --updates rows: also scored on Multi30k's validation set


def mtkit(*args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run the mtkit of this interpreter's environment, failing loudly."""
    cmd = [sys.executable, "-m", "mtkit", *args]
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kwargs)


def prepare_data() -> Path:
    """The `make demo` data (the recipe's raw, spm and prepare stages), made once."""
    make = [
        "make",
        "-s",
        "-C",
        str(RECIPE),
        "prepare",
        f"WORK={PLACE['work'] / 'data'}",
        f"MTKIT={sys.executable} -m mtkit",
    ]
    subprocess.run(make, check=True)
    return PLACE["work"] / "data" / "en-de" / "data"


def done(results: Path) -> dict[tuple[str, int], dict[str, Any]]:
    if not results.is_file():
        return {}
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    return {(r["variant"], r["seed"]): r for r in rows}  # a later row (--rerun) supersedes


# demo.yaml's max_time, and where data and runs go; --budget and --work change them
BUDGET = {"seconds": 480.0}
PLACE = {"work": WORK}


def train(name: str, seed: int, data: Path, run: Path, extra: list[str]) -> float:
    """Train (or resume) one run; returns the CPU seconds the training process used, so that a
    row trained on a busy machine shows it (cpu_share below)."""
    preset, overrides = VARIANTS[name]
    # fp32 unless the variant says otherwise: the rows compare models, not CPU precisions (auto
    # trains in bf16 where the CPU has it, see mtkit/cpu.py; the modern_bf16 row measures that)
    args = [
        "train",
        "--config",
        str(RECIPE / "demo.yaml"),
        "--data",
        str(data),
        "--run-dir",
        str(run),
        "--preset",
        preset,
        "--set",
        f"seed={seed}",
        "-q",
        "--set",
        "precision=fp32",
        "--set",
        f"max_time={BUDGET['seconds']}",
        *set_args(overrides),
        *extra,
        *set_args(TRAIN_SETTINGS.get(name, {}), prefix=""),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    mtkit(*args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def train_speed(run: Path) -> float | None:
    """Mean target tokens/s of the run's train records (metrics.jsonl, every log_every updates:
    training time only, checkpoint writes excluded)."""
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x]
    speeds = [r["tgt_tokens_per_s"] for r in records if "tgt_tokens_per_s" in r]
    return sum(speeds) / len(speeds) if speeds else None


def checkpoint_info(path: Path) -> dict[str, Any]:
    from mtkit.checkpoint import Checkpoint
    from mtkit.model.inference import cache_bytes_per_sentence
    from mtkit.model.transformer import build_model, count_parameters

    ckpt = Checkpoint.load(path)
    model = ckpt.build_model().eval()
    state = ckpt.resume.state if ckpt.resume else {}
    return {
        "update": ckpt.resume.update if ckpt.resume else 0,
        "elapsed": float(state.get("elapsed", 0.0)),
        "params": count_parameters(model),
        "state_bytes": cache_bytes_per_sentence(build_model(model.cfg).eval(), 30, 30, 5),
    }


def score(ckpt: Path, out: Path, corpus: str = TEST) -> dict[str, Any]:
    """Beam-5 translation of the Multi30k set ``corpus`` (timed), its BLEU/chrF with signatures."""
    src = PLACE["work"] / "data" / "raw" / f"{corpus}.en"
    ref = PLACE["work"] / "data" / "raw" / f"{corpus}.de"
    start = time.perf_counter()
    # scored in fp32 whatever `auto` decodes in on this CPU: the rows compare training
    mtkit(
        "translate",
        "-m",
        str(ckpt),
        "-i",
        str(src),
        "-o",
        str(out),
        "--beam",
        "5",
        "-q",
        "--dtype",
        "fp32",
    )
    seconds = time.perf_counter() - start
    from mtkit.checkpoint import load_for_inference

    tgt = load_for_inference(ckpt).tgt_tokenizer
    lines = out.read_text(encoding="utf-8").splitlines()
    tokens = sum(len(ids) + 1 for ids in tgt.encode(lines))
    report = json.loads(
        mtkit("evaluate", "-i", str(out), "-r", str(ref), "--metrics", "bleu,chrf", "--json").stdout
    )
    by_name = {item["name"]: item for item in report}
    bleu = next(v for k, v in by_name.items() if k.startswith("BLEU"))
    chrf = next(v for k, v in by_name.items() if k.startswith("chrF"))
    return {
        "bleu": bleu["score"],
        "chrf": chrf["score"],
        "bleu_signature": bleu["signature"],
        "chrf_signature": chrf["signature"],
        "decode_tok_s": tokens / seconds,
    }


def run_variant(name: str, seed: int, data: Path, base_updates: int | None) -> dict[str, Any]:
    run = PLACE["work"] / "runs" / f"{name}-seed{seed}"
    if FIXED["updates"]:
        run = run.with_name(f"{run.name}-{FIXED['updates']}-updates")
    extra = (
        []
        if base_updates is None
        else ["--set", f"save_every={base_updates}", "--set", "keep_last=0"]
    )  # 0: keep every one
    if FIXED["updates"]:  # hours per run: save often, so a killed sitting loses little
        extra += ["--set", f"save_every={SAVE_EVERY}", "--set", "keep_last=1"]
    budget = _budget_updates(name, base_updates)
    if budget is not None:  # --speeds: an update budget instead of the clock
        if (run / "checkpoint_last.pt").is_file() and _update(run) > budget:
            run = run.with_name(run.name + "-emulated")  # went further on the clock: start anew
        extra += ["--set", "max_time=0", "--set", f"max_updates={budget}"]
    cpu = None
    if not (run / "checkpoint_last.pt").is_file() or not _finished(run, budget):
        cpu = train(name, seed, data, run, extra)
    info = checkpoint_info(run / "checkpoint_last.pt")
    row: dict[str, Any] = {
        "variant": name,
        "seed": seed,
        "preset": VARIANTS[name][0],
        "overrides": VARIANTS[name][1],
        **info,
    }
    if name in TRAIN_SETTINGS:
        row["train_settings"] = TRAIN_SETTINGS[name]
    # CPU seconds of training over (budget x threads): near 1 on a quiet machine, lower when
    # other processes took the cores (then the row's wall-clock figures are not comparable)
    threads = int(os.environ.get("OMP_NUM_THREADS", "2"))
    clock = cpu is not None and budget is None  # emulated rows do not depend on the clock
    row["cpu_share"] = cpu / (info["elapsed"] * threads) if clock else None
    row["train_tok_s"] = train_speed(run)
    row.update(score(run / "checkpoint_last.pt", run / f"{TEST}.hyp.de"))
    if FIXED["updates"]:  # the longer budget's rows: the validation set too, so one test set
        val = score(run / "checkpoint_last.pt", run / f"{VALID}.hyp.de", VALID)  # does not decide
        row["valid"] = {"set": VALID, "bleu": val["bleu"], "chrf": val["chrf"]}
    if SPEEDS and budget is not None:  # the --speeds file's (CPU-time), not this busy run's
        speed = SPEEDS[name]
        row.update(budget_updates=budget, train_tok_s=speed["train"], decode_tok_s=speed["decode"])
    if base_updates is not None:
        row["equal_updates"] = equal_updates(name, seed, data, run, base_updates, extra)
    row.update(machine=machine_lines()[0], load=os.getloadavg()[0], time=time.strftime("%F %T"))
    return row


# --speeds: {variant: {"train": tok/s, "decode": tok/s, ...}} of bench_variant_speed.py --json
SPEEDS: dict[str, dict[str, float]] = {}


def _budget_updates(name: str, base_updates: int | None) -> int | None:
    """With --updates, that count; with --speeds, the updates the 480 s budget buys the variant
    on a quiet machine: the baseline's count there times the variant's training speed ratio (the
    baseline: its count)."""
    if FIXED["updates"]:
        return FIXED["updates"]
    if not SPEEDS:
        return None
    if base_updates is None:
        return BASE["updates"]
    return round(BASE["updates"] * SPEEDS[name]["train"] / SPEEDS[BASELINE]["train"])


SAVE_EVERY = 250  # --updates runs: a checkpoint every this many updates (resume from it)
BASE = {"updates": 0}  # the baseline's updates in 480 s on a quiet machine (--base-updates)
FIXED = {"updates": 0}  # --updates: every variant's count (0: the clock or --speeds)


def _update(run: Path) -> int:
    return checkpoint_info(run / "checkpoint_last.pt")["update"]


def _finished(run: Path, budget: int | None) -> bool:
    """The budget was spent (a killed sitting leaves a run that resumes instead)."""
    info = checkpoint_info(run / "checkpoint_last.pt")
    if budget is not None:
        return info["update"] >= budget
    return info["elapsed"] >= BUDGET["seconds"] - 1


def equal_updates(name: str, seed: int, data: Path, run: Path, updates: int, extra: list[str]):
    """BLEU/chrF at the baseline's update count: the saved checkpoint, or the run resumed to it
    without a time limit (in a copy, so the budget run stays as it was)."""
    ckpt = run / f"checkpoint_{updates}.pt"
    if not ckpt.is_file():
        longer = run.with_name(run.name + "-to-base")
        if not longer.exists():
            subprocess.run(["cp", "-r", str(run), str(longer)], check=True)
        train(
            name,
            seed,
            data,
            longer,
            [*extra, "--set", "max_time=0", "--set", f"max_updates={updates}"],
        )
        ckpt = longer / "checkpoint_last.pt"
    result = score(ckpt, run / f"{TEST}.hyp-at-{updates}.de")
    return {"updates": updates, "bleu": result["bleu"], "chrf": result["chrf"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated variant names")
    parser.add_argument("--seeds", default="1", help="comma-separated seeds")
    parser.add_argument("--results", type=Path)
    parser.add_argument("--report", action="store_true", help="print the table and stop")
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print the README table (one row per variant, mean over seeds) and stop",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=480.0,
        help="seconds of training (480: make demo's; less only to smoke-test)",
    )
    parser.add_argument("--work", type=Path, default=WORK, help="data and runs (.bench/variants)")
    parser.add_argument(
        "--speeds",
        type=Path,
        help="emulate the budget on a busy machine: a bench_variant_speed.py --json file; each "
        "variant trains --base-updates x its training speed ratio updates (results: "
        "results/variants-emulated.jsonl unless --results)",
    )
    parser.add_argument(
        "--base-updates",
        type=int,
        default=0,
        help="with --speeds: the baseline's updates in 480 s on a quiet machine (default: its "
        "seed-1 row in results/variants.jsonl)",
    )
    parser.add_argument(
        "--updates",
        type=int,
        default=0,
        help="train every variant exactly this many updates, no clock (results: "
        "results/variants-N-updates.jsonl unless --results)",
    )
    parser.add_argument(
        "--baseline",
        default=BASELINE,
        help=f"the variant the others are compared with, trained first per seed ({BASELINE})",
    )
    parser.add_argument(
        "--rerun",
        action="store_true",
        help="train the --only variants again from scratch (the new row supersedes the old)",
    )
    args = parser.parse_args()
    BUDGET["seconds"] = args.budget
    PLACE["work"] = args.work.resolve()  # make -C runs the recipe elsewhere
    if args.updates and args.speeds:
        raise SystemExit("--updates and --speeds are two budgets: give one")
    FIXED["updates"] = max(args.updates, 0)
    if args.speeds:
        SPEEDS.update(json.loads(args.speeds.read_text())["variants"])
        BASE["updates"] = args.base_updates or done(RESULTS)[(BASELINE, 1)]["update"]
    fixed = RESULTS.with_name(f"variants-{args.updates}-updates.jsonl")
    args.results = args.results or (fixed if args.updates else EMULATED if args.speeds else RESULTS)
    rows = done(args.results)
    if args.report or args.markdown:
        print(markdown(rows) if args.markdown else report(rows, args.baseline))
        return
    names = [n for n in (args.only.split(",") if args.only else VARIANTS) if n]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    unmeasured = [n for n in names if SPEEDS and n not in SPEEDS]
    if unmeasured:
        raise SystemExit(
            f"--speeds {args.speeds} has no speed for {', '.join(unmeasured)}: "
            "train it on the clock (without --speeds)"
        )
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    print("\n".join(machine_lines()), flush=True)
    data = prepare_data()
    for seed in [int(s) for s in args.seeds.split(",")]:
        for name in [args.baseline] + [n for n in names if n != args.baseline]:
            if args.rerun and args.only and name in names:
                rows.pop((name, seed), None)
                for run in PLACE["work"].glob(f"runs/{name}-seed{seed}*"):
                    shutil.rmtree(run)
            if (name, seed) in rows:
                continue
            base = rows.get((args.baseline, seed))
            # --updates: every row at the same count
            equal = name == args.baseline or FIXED["updates"]
            row = run_variant(name, seed, data, None if equal else base["update"])
            rows[(name, seed)] = row
            args.results.parent.mkdir(parents=True, exist_ok=True)
            with args.results.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")
            print(
                f"{name} seed {seed}: {row['update']} updates, BLEU {row['bleu']:.1f}", flush=True
            )
    print(report(rows, args.baseline))


if __name__ == "__main__":
    main()
