"""Benchmark `mtkit prepare`: sentence pairs per second on Multi30k train (29,000 en-de pairs).

Trains a joint 8000-piece sentencepiece model first (not timed), then times `prepare` on the
train split (cleaning, encoding in worker processes, binarized writes, manifest) and prints the
best and median throughput over ``--repeat`` runs, next to the in-process (``--workers 0``) run.

    python benchmarks/bench_prepare.py [DATA_DIR] [--workers 2] [--repeat 5]

DATA_DIR holds train.en and train.de (or .gz); default: /work/shared/data/multi30k, else the
repository's recipes/multi30k/data.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

from mtkit.config import PrepareConfig, SpmConfig
from mtkit.pipeline.prepare import prepare
from mtkit.pipeline.spm import train_models

DEFAULT_DIRS = (
    Path("/work/shared/data/multi30k"),
    Path(__file__).resolve().parent.parent / "recipes" / "multi30k" / "data",
)


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the encoding workers)."""
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def time_prepare(
    prefix: str, model: str, out: Path, workers: int, repeat: int
) -> tuple[list[float], list[float]]:
    """Pairs per wall-clock second, and per CPU second, of each of ``repeat`` runs."""
    rates, cpu_rates = [], []
    for i in range(repeat):
        cfg = PrepareConfig(
            train=prefix, src_spm=model, out_dir=str(out / f"w{workers}-{i}"), workers=workers
        )
        start, start_cpu = time.perf_counter(), cpu_seconds()
        pairs = prepare(cfg)["splits"]["train"]["read"]
        rates.append(pairs / (time.perf_counter() - start))
        cpu_rates.append(pairs / (cpu_seconds() - start_cpu))
    return rates, cpu_rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    data_dir = args.data_dir or next(d for d in DEFAULT_DIRS if d.is_dir())
    prefix = str(data_dir / "train")
    with tempfile.TemporaryDirectory() as tmp:
        spm_cfg = SpmConfig(
            train=prefix, src_lang="en", tgt_lang="de", model_prefix=f"{tmp}/spm", vocab_size=8000
        )
        model = train_models(spm_cfg)[0]["model"]
        prepare(PrepareConfig(train=prefix, src_spm=model, out_dir=f"{tmp}/warm-up", workers=0))
        for workers in dict.fromkeys((args.workers, 0)):
            rates, cpu_rates = time_prepare(prefix, model, Path(tmp), workers, args.repeat)
            print(
                f"mtkit prepare, {data_dir}/train (en-de), workers={workers}: "
                f"best {max(rates):,.0f} pairs/s, median {statistics.median(rates):,.0f} pairs/s "
                f"({args.repeat} runs; {statistics.median(cpu_rates):,.0f} pairs per CPU-second)"
            )


if __name__ == "__main__":
    main()
