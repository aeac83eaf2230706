"""Run ``joeynmt train CONFIG`` with a per-update timing probe.

Runs inside the JoeyNMT virtual environment (see joeynmt_env.py), never in mtkit's: it imports
only JoeyNMT, torch and the standard library. Usage::

    python joeynmt_probe.py PROBE.jsonl THREADS train CONFIG.yaml --skip-test

Before handing over to JoeyNMT's own ``__main__``, it wraps ``TrainManager._train_step`` (one
call per update with ``batch_multiplier: 1``) so that each update appends one JSON line to
PROBE.jsonl: the ``time.perf_counter()`` at which the step began, the update number, and the
batch's size. The interval between the starts of two steps covers one whole training cycle:
forward, backward, clipping, optimizer and scheduler step, logging, and loading the next batch.
``tgt_tokens`` is JoeyNMT's own ``batch.ntokens``: non-padding target tokens, EOS included.
"""

from __future__ import annotations

import json
import sys
import time


def install_probe(path: str) -> None:
    from joeynmt import training

    out = open(path, "w", encoding="utf-8", buffering=1)  # noqa: SIM115 - lives as long as the run
    original = training.TrainManager._train_step

    def timed_step(self, batch):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        result = original(self, batch)
        record = {
            "t": start,
            "update": self.stats.steps + 1,  # the update this batch is about to make
            "tgt_tokens": int(batch.ntokens),
            "src_tokens": int(batch.src_mask.sum()),
            "sentences": int(batch.nseqs),
            "tgt_padded": int(batch.trg.numel()),
            "src_padded": int(batch.src.numel()),
        }
        out.write(json.dumps(record) + "\n")
        return result

    training.TrainManager._train_step = timed_step


def main() -> None:
    probe_path, threads, *joey_args = sys.argv[1:]
    import torch

    torch.set_num_threads(int(threads))
    install_probe(probe_path)
    print(f"probe: torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    from joeynmt.__main__ import main as joeynmt_main

    sys.argv = ["joeynmt", *joey_args]
    joeynmt_main()


if __name__ == "__main__":
    main()
