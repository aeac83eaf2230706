"""Run ``eole train -config CONFIG`` with a per-update timing probe.

Runs inside the Eole virtual environment (see eole_env.py), never in mtkit's: it imports only
Eole, torch and the standard library. Usage::

    python eole_probe.py PROBE.jsonl THREADS train -config CONFIG.yaml

Before handing over to Eole's own command line, it wraps ``eole.trainer.Trainer._train_step``
(one call per update: the batches of one gradient accumulation, one with ``accum_count: [1]``)
so that each update appends one JSON line to PROBE.jsonl: the ``time.perf_counter()`` at which
the step began, the update number (``optim.training_step`` before the step, which counts from
1), and the batch's size. The interval between the starts of two steps covers one whole
training cycle: forward, backward, clipping, optimizer step, logging, and building the next
batch (Eole reads, numericalizes, buckets and pads its data on the fly in the same process with
``num_workers: 0``). Eole's ``batch["tgt"]`` is BOS + pieces + EOS; the decoder reads
``tgt[:, :-1]`` and is scored on ``tgt[:, 1:]``, so ``tgt_tokens`` (non-padding positions of
``tgt[:, 1:]``) counts the pieces and EOS, not BOS, as Eole's own ``n_tokens`` does, and
``tgt_padded`` the positions of ``tgt[:, 1:]`` with padding.
"""

from __future__ import annotations

import json
import sys
import time


def install_probe(path: str) -> None:
    from eole import trainer

    out = open(path, "w", encoding="utf-8", buffering=1)  # noqa: SIM115 - lives as long as the run
    original = trainer.Trainer._train_step

    def timed_step(self, batches, normalization, total_stats, report_stats, step=0):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        update = self.optim.training_step  # the update these batches are about to make
        result = original(self, batches, normalization, total_stats, report_stats, step=step)
        pad = self.train_loss.padding_idx
        targets = [batch["tgt"][:, 1:] for batch in batches]
        record = {
            "t": start,
            "update": update,
            "tgt_tokens": sum(int(t.ne(pad).sum()) for t in targets),
            "src_tokens": sum(int(batch["srclen"].sum()) for batch in batches),
            "sentences": sum(len(batch["srclen"]) for batch in batches),
            "tgt_padded": sum(t.numel() for t in targets),
            "src_padded": sum(batch["src"].numel() for batch in batches),
        }
        out.write(json.dumps(record) + "\n")
        return result

    trainer.Trainer._train_step = timed_step


def main() -> None:
    probe_path, threads, *eole_args = sys.argv[1:]
    import torch

    torch.set_num_threads(int(threads))
    install_probe(probe_path)
    print(f"probe: torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    from eole.bin.main import main as eole_main

    sys.argv = ["eole", *eole_args]
    eole_main()


if __name__ == "__main__":
    main()
