"""Run every benchmark (``benchmarks/bench_*.py``), one subprocess each; what `make bench` runs.

    python benchmarks/run_all.py                 # all of them, full length
    python benchmarks/run_all.py --quick         # a short version of each (smoke test)
    python benchmarks/run_all.py --only train    # bench_train.py only (repeatable)
    python benchmarks/run_all.py --only train -- --rounds 2   # extra arguments for it
    python benchmarks/run_all.py --list

Each script prints its own figures and the command that produced them; this runner streams that
output, then a summary of exit codes and durations, and exits non-zero if any script failed.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# --quick: these arguments, each passed only if the script's --help lists its flag
QUICK_ARGS: dict[str, list[list[str]]] = {
    "bench_prepare": [["--repeat", "1"]],
    "bench_train": [["--quick"]],
    "bench_train_mtkit": [["--warmup", "2"], ["--updates", "5"]],
    "bench_translate": [["--limit", "100"], ["--slow-limit", "20"]],
    "bench_engines": [["--limit", "64"], ["--repeat", "1"]],
    "bench_gqa": [["--rounds", "1"], ["--sentences", "4"]],
    "bench_kernels": [["--calls", "20"]],
    "bench_step": [["--limit", "64"]],
    "bench_serve": [["--sentences", "40"], ["--concurrency", "1,8"], ["--time-limit", "20"]],
    "bench_confidence": [["--limit", "100"]],
    "bench_shortlist": [["--limit", "64"], ["--rounds", "1"], ["--no-eflomal"]],
    "bench_constraints": [["--limit", "60"], ["--rounds", "1"]],
    "bench_students": [["--limit", "64"], ["--single-limit", "8"], ["--rounds", "1"]],
    "bench_robustness": [["--limit", "100"]],
}
DEFAULT_QUICK = [["--quick"]]


def discover() -> list[Path]:
    return sorted(HERE.glob("bench_*.py"))


def select(scripts: list[Path], names: list[str]) -> list[Path]:
    """Scripts named by ``names`` ("train", "bench_train" or "bench_train.py")."""
    by_name = {p.stem: p for p in scripts}
    chosen = []
    for name in names:
        stem = Path(name).stem
        stem = stem if stem.startswith("bench_") else f"bench_{stem}"
        if stem not in by_name:
            known = ", ".join(s.removeprefix("bench_") for s in by_name)
            raise SystemExit(f"no benchmark '{name}' (known: {known})")
        chosen.append(by_name[stem])
    return list(dict.fromkeys(chosen))


def quick_args(script: Path) -> list[str]:
    """The script's short-run arguments, keeping only flags its --help knows."""
    wanted = QUICK_ARGS.get(script.stem, DEFAULT_QUICK)
    help_text = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, check=False
    ).stdout
    return [arg for group in wanted if group[0] in help_text for arg in group]


def run(script: Path, extra: list[str]) -> tuple[int, float]:
    cmd = [sys.executable, str(script), *extra]
    print(f"\n=== {script.name}: $ {shlex.join(cmd)}", flush=True)
    start = time.perf_counter()
    code = subprocess.run(cmd, check=False).returncode
    return code, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", action="append", default=[], help="a benchmark to run (repeatable)")
    p.add_argument("--quick", action="store_true", help="a short version of each benchmark")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    p.add_argument("rest", nargs="*", help="after --: arguments for the one --only benchmark")
    args = p.parse_args(argv)
    scripts = discover()
    if args.list:
        print("\n".join(s.stem.removeprefix("bench_") for s in scripts))
        return 0
    if args.only:
        scripts = select(scripts, [n for item in args.only for n in item.split(",")])
    if args.rest and len(scripts) != 1:
        p.error("extra arguments need exactly one --only benchmark")
    summary = []
    for script in scripts:
        extra = (quick_args(script) if args.quick else []) + args.rest
        code, seconds = run(script, extra)
        summary.append((script.name, code, seconds))
    print("\n=== summary")
    for name, code, seconds in summary:
        print(f"{name:24s} {'ok' if code == 0 else f'FAILED ({code})':12s} {seconds:8.1f} s")
    return int(any(code for _, code, _ in summary))


if __name__ == "__main__":
    sys.exit(main())
