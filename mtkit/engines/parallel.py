"""``--workers N`` for mtkit's own engine: N batches decoded at once, each in a worker process.

One batch decoded on T threads parallelises each matrix product, but at a few hundred rows per
step much of a step is not matrix products (attention over a few keys, the cache reorder, the
search, Python), and that part does not speed up with threads. CTranslate2's ``inter_threads``
decodes several batches at once instead, one thread each; :class:`ParallelEngine` does the same
with processes (an interpreter each, so no worker waits on another's lock). The main process
reads, encodes and batches the lines as :class:`~mtkit.engines.native.NativeEngine` does; each
worker holds the models and decodes whole batches; the results come back in input order.
Every batch is decoded as a ``--workers 1`` engine with the workers' ``--threads`` decodes it,
so the output equals that engine's.

Workers are spawned, not forked (the main process has already started torch's thread pools),
and each loads the checkpoints itself; the engine waits until all are ready, so a worker that
cannot start is reported before any line is decoded. Sampling draws from one random stream
across batches (reproducible with ``--seed``), so it takes one worker.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.data.tokenizer import Tokenizer
from mtkit.devices import torch_device
from mtkit.engines import native
from mtkit.engines.base import Progress, Translation, encode_sources, source_batches
from mtkit.errors import MtkitError
from mtkit.processes import pool_result, stop_now, stop_with_parent

START_TIMEOUT_S = 600  # for every worker to load the checkpoints


def worker_config(config: TranslateConfig) -> TranslateConfig:
    """What each worker runs: one batch at a time on ``--threads`` threads, or with threads 0
    on an equal share of the threads torch would use here."""
    threads = config.threads or max(1, torch.get_num_threads() // config.workers)
    return replace(config, workers=1, threads=threads)


def check_workers(config: TranslateConfig, search: SearchConfig) -> None:
    """Refuse, with one line, what several workers cannot do."""
    if config.workers > 1 and search.sampling:
        raise MtkitError("--sampling draws from one random stream: it takes --workers 1")


@dataclass
class ParallelEngine:
    """Lines encoded and batched here, batches decoded by ``workers`` processes."""

    config: TranslateConfig
    src_tokenizer: Tokenizer
    max_source_pieces: int
    executor: ProcessPoolExecutor
    pids: list[int] = field(default_factory=list)  # the workers' process ids
    stopped: bool = False  # by stop(): an error or a signal while decoding

    def check(self, search: SearchConfig) -> None:
        check_workers(self.config, search)

    def translate(
        self,
        lines: Sequence[str],
        search: SearchConfig | None = None,
        first_number: int = 1,
        progress: Progress | None = None,
    ) -> list[list[Translation]]:
        search = search or self.config.search
        sources = encode_sources(self.src_tokenizer, lines, self.max_source_pieces, first_number,
                                 self.config.tgt_lang)  # fmt: skip
        batches = list(source_batches(sources, self.config.max_tokens))
        found = self._decode([[sources[i] for i in index] for index in batches], search,
                             progress)  # fmt: skip
        kept = [i for index in batches for i in index]
        if progress is not None:
            progress.update(len(lines) - len(kept))  # lines with nothing to translate
        return placed(len(lines), kept, [hyps for batch in found for hyps in batch])

    def translate_groups(
        self, groups: Sequence[Sequence[str]], search: SearchConfig | None = None
    ) -> list[list[list[Translation]]]:
        """Each group of lines decoded as one batch, as given (for callers that batch
        themselves: the engine benchmark gives every engine the same batches)."""
        search = search or self.config.search
        encoded = [encode_sources(self.src_tokenizer, group, self.max_source_pieces,
                                  tgt_lang=self.config.tgt_lang) for group in groups]  # fmt: skip
        kept = [[i for i, row in enumerate(rows) if row] for rows in encoded]
        found = self._decode([[rows[i] for i in index] for rows, index in zip(encoded, kept,
                                                                              strict=True)],
                             search)  # fmt: skip
        return [placed(len(group), index, hyps)
                for group, index, hyps in zip(groups, kept, found, strict=True)]  # fmt: skip

    def _decode(
        self, batches: list[list[list[int]]], search: SearchConfig, progress: Progress | None = None
    ) -> list[list[list[Translation]]]:
        """Every non-empty batch submitted at once; results in order."""
        self.check(search)
        if self.stopped:
            raise MtkitError("the decoding workers were stopped; load the engine again")
        futures: list[Future | None] = [
            self.executor.submit(_translate_in_worker, rows, search) if rows else None
            for rows in batches
        ]
        found = []
        try:
            for rows, future in zip(batches, futures, strict=True):
                found.append(_result(future) if future is not None else [])
                if progress is not None:
                    progress.update(len(rows))
        except BaseException:  # an error or a signal: stop now, not after the batches queued
            self.stop()
            raise
        return found

    def stop(self) -> None:
        """End the workers at once, dropping the batches they hold (after this the engine
        cannot translate): a signal must not wait for batches nobody will read."""
        self.stopped = True
        stop_now(self.executor)


def placed(count: int, index: list[int], hyps: list[list[Translation]]) -> list[list[Translation]]:
    """``count`` lines' results: ``hyps[j]`` at line ``index[j]``, [] where nothing was decoded."""
    results: list[list[Translation]] = [[] for _ in range(count)]
    for i, line_hyps in zip(index, hyps, strict=True):
        results[i] = line_hyps
    return results


def _result(future: Future) -> Any:
    return pool_result(future, "a decoding worker stopped (out of memory?); try fewer --workers")


def load(checkpoints: list[str], config: TranslateConfig) -> ParallelEngine:
    """Check and load here (one-line errors, the dtype line), then start ``config.workers``
    workers that each load the checkpoints, and wait until they all have."""
    check_workers(config, config.search)
    if torch_device(config.device).type != "cpu":
        raise MtkitError("--workers > 1 decodes on CPU; on a GPU give larger batches "
                         "(--max-tokens) instead")  # fmt: skip
    each = worker_config(config)
    here = native.load(checkpoints, each)
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(config.workers)
    executor = ProcessPoolExecutor(config.workers, mp_context=context,
                                   initializer=_start_worker,
                                   initargs=(checkpoints, each, ready))  # fmt: skip
    engine = ParallelEngine(config, here.src_tokenizer, here.max_source_pieces, executor)
    weakref.finalize(engine, executor.shutdown, wait=False, cancel_futures=True)
    started = [executor.submit(_wait_for_the_others) for _ in range(config.workers)]
    try:
        engine.pids = [future.result() for future in started]
    except (BrokenProcessPool, threading.BrokenBarrierError):
        executor.shutdown(wait=False, cancel_futures=True)
        raise MtkitError(
            f"the {config.workers} decoding workers could not start (out of memory? a Python "
            "script that starts workers needs an `if __name__ == '__main__':` guard)"
        ) from None
    return engine


_worker: native.NativeEngine | None = None
_ready: Any = None


def _start_worker(checkpoints: list[str], config: TranslateConfig, ready: Any) -> None:
    global _worker, _ready
    stop_with_parent()
    _worker, _ready = native.load(checkpoints, config, announce=False), ready


def _wait_for_the_others() -> int:
    """Returns once every worker has loaded (each holds one of these calls until then)."""
    _ready.wait(START_TIMEOUT_S)
    return os.getpid()


def _translate_in_worker(rows: list[list[int]], search: SearchConfig) -> list[list[Translation]]:
    assert _worker is not None, "worker not initialised"
    return _worker.translate_batch(rows, search)
