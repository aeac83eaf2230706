"""Decoding speed through ``mtkit.engines.load_engine``, as `mtkit translate` runs it: the
native engine and the CTranslate2 engine over the same model, one thread, batches by
``--max-tokens`` (the engines' own skeleton: encode, batch, decode, put back).

For before/after of an engine refactor with ``benchmarks/ab.py`` (copy this file into the old
revision's tree, ``.bench/ab/REV/benchmarks/``, if it lacks it)::

    .venv/bin/python benchmarks/ab.py --base REV --rounds 5 -- load_engine_rows.py CKPT CT2_DIR SRC
"""

from __future__ import annotations

import argparse
import time

from machine import print_machine

from mtkit.config import TranslateConfig
from mtkit.engines import load_engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("ct2_dir", help="`mtkit export --format ctranslate2` of the checkpoint")
    parser.add_argument("source", help="one sentence per line")
    parser.add_argument("--limit", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=3, help="timed passes (best kept)")
    args = parser.parse_args()
    print_machine()
    with open(args.source, encoding="utf-8") as handle:
        lines = handle.read().splitlines()[: args.limit]
    rows = [
        ("ct2 engine beam5", args.ct2_dir, {"engine": "ctranslate2"}),
        ("ct2 engine greedy", args.ct2_dir, {"engine": "ctranslate2", "beam": 1}),
        ("mtkit engine greedy", args.checkpoint, {"beam": 1}),
    ]
    for name, model, flat in rows:
        config = TranslateConfig.from_flat({"threads": 1, "device": "cpu", **flat})
        engine = load_engine([model], config)
        engine.translate(lines[:32])  # warm-up
        best = 0.0
        for _ in range(args.repeat):
            start = time.perf_counter()
            found = engine.translate(lines)
            tokens = sum(hyps[0].tokens + 1 for hyps in found if hyps)  # EOS counted
            best = max(best, tokens / (time.perf_counter() - start))
        print(f"  {name}  {best:.0f} tok/s", flush=True)


if __name__ == "__main__":
    main()
