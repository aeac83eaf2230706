"""Before/after in one run: a benchmark script under two git revisions, alternately.

Refactors promise "no engine slower"; on a shared machine only a ratio measured in one run
means anything. This checks the old revision out into ``.bench/ab/REV`` (a git worktree), then
runs ``SCRIPT ARGS`` from each tree's own ``benchmarks/`` directory with that tree first on
``PYTHONPATH``, ``--rounds`` times each, old and new alternating (old first in rounds 1, 3, ...,
new first in rounds 2, 4, ...; an even count balances the order), and prints, for every row the
script prints as ``NAME ... X tok/s``, the median tokens/s of both and the ratio new/old, and
the CPU seconds each whole run took (user + system, from the kernel's accounting). With one
thread and the same work on both sides, CPU seconds hardly depend on what else runs on the
machine, while wall-clock rates do: on a busy machine, trust the CPU-time ratio.

    .venv/bin/python benchmarks/ab.py --base d9ab879 -- bench_translate.py CKPT --limit 400
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
from pathlib import Path

CPU = "cpu seconds (whole run)"
ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".bench" / "ab"
# "  NAME    12.3 sent/s   456 tok/s" (bench_translate) or "  NAME: 456 tok/s, ..." (bench_engines)
ROW = re.compile(r"^[ \t]*(?P<name>[^:]*?\S)(?::|[ \t]{2,}).*?(?P<tps>[\d.]+)[ \t]+tok/s")


def worktree(rev: str) -> Path:
    """A checkout of ``rev`` under .bench/ab (made once, reused)."""
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    path = WORK / sha
    if not path.is_dir():
        WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), sha],
            check=True,
            capture_output=True,
        )
    return path


def run(tree: Path, script: str, args: list[str]) -> dict[str, float]:
    """One run of ``script`` from ``tree``: tokens/s per printed row, and its CPU seconds."""
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{tree / 'benchmarks'}")
    cmd = [sys.executable, str(tree / "benchmarks" / script), *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rows = (ROW.match(line) for line in out.stdout.splitlines())
    found = {m["name"]: float(m["tps"]) for m in rows if m}
    found[CPU] = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the old revision (e.g. a commit)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each tree, alternating")
    parser.add_argument("script", help="a script in benchmarks/ (e.g. bench_translate.py)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    opts = parser.parse_args()
    trees = {"old": worktree(opts.base), "new": ROOT}
    seen: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for i in range(opts.rounds):
        # odd rounds new first: a machine that warms up or slows down over a run (turbo, other
        # jobs, page cache) then favours neither side
        for side in ("old", "new") if i % 2 == 0 else ("new", "old"):
            tree = trees[side]
            for name, tps in run(tree, opts.script, opts.args).items():
                seen[side].setdefault(name, []).append(tps)
            print(f"round {i + 1} {side} done", file=sys.stderr, flush=True)
    print(
        f"{opts.script} {' '.join(opts.args)}: old = {opts.base}, new = working tree; "
        f"median of {opts.rounds} alternating runs"
    )
    print(f"{'row':<30} {'old tok/s':>10} {'new tok/s':>10} {'new/old':>8}  runs (old | new)")
    for name, old in seen["old"].items():
        new = seen["new"].get(name)
        if new and name != CPU:
            a, b = statistics.median(old), statistics.median(new)
            runs = f"{' '.join(f'{x:.0f}' for x in old)} | {' '.join(f'{x:.0f}' for x in new)}"
            print(f"{name:<30} {a:10.0f} {b:10.0f} {b / a:8.3f}  {runs}")
    a, b = statistics.median(seen["old"][CPU]), statistics.median(seen["new"][CPU])
    print(f"{CPU:<30} {a:10.1f} {b:10.1f}  speed new/old {a / b:.3f} (same work, CPU time)")


if __name__ == "__main__":
    main()
