"""``--workers N``: N batches decoded at once, each in a worker process.

One batch decoded on T threads parallelises each matrix product, but at a few hundred rows per
step much of a step is not matrix products (attention over a few keys, the cache reorder, the
search, Python), and that part does not speed up with threads. CTranslate2's ``inter_threads``
decodes several batches at once instead, one thread each; :class:`ParallelEngine` does the same
with processes (an interpreter each, so no worker waits on another's lock) for an engine that
cannot do it itself (the registry, :mod:`mtkit.engines`, says which). The main process reads,
encodes and batches the lines through the shared skeleton (:class:`~mtkit.engines.base.Engine`)
knowing only the model's tokenizers and limits (``describe``: no model is built here); each
worker loads the engine itself and decodes whole batches; the results come back in input order.
Every batch is decoded as a ``--workers 1`` engine with the workers' ``--threads`` decodes it,
so the output equals that engine's.

Workers are spawned, not forked (the main process has already started torch's thread pools),
and the engine waits until all are ready, so a worker that cannot start is reported before any
line is decoded. Sampling draws from one random stream across batches (reproducible with
``--seed``), so it takes one worker.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import threading
import weakref
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.data.tokenizer import Tokenizer
from mtkit.devices import torch_device
from mtkit.engines.base import Engine, Phrases, Progress, Translation
from mtkit.errors import MtkitError
from mtkit.languages import Languages
from mtkit.processes import pool_result, stop_now, stop_with_parent

START_TIMEOUT_S = 600  # for every worker to load the model


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
class ParallelEngine(Engine):
    """Lines encoded and batched here, batches decoded by ``workers`` processes."""

    config: TranslateConfig
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    max_positions: int
    model_languages: Languages | None
    executor: ProcessPoolExecutor
    pids: list[int] = field(default_factory=list)  # the workers' process ids
    stopped: bool = False  # by stop(): an error or a signal while decoding

    def check(self, search: SearchConfig) -> None:
        check_workers(self.config, search)

    def decode_batch(
        self, rows: list[list[int]], search: SearchConfig, phrases: list[Phrases] | None = None
    ) -> list[list[Translation]]:
        return self.decode_batches([rows], search, None, None if phrases is None else [phrases])[0]

    def decode_batches(
        self,
        batches: list[list[list[int]]],
        search: SearchConfig,
        progress: Progress | None,
        phrases: list[list[Phrases]] | None = None,
    ) -> list[list[list[Translation]]]:
        """Every non-empty batch submitted at once; results in order."""
        self.check(search)
        if self.stopped:
            raise MtkitError("the decoding workers were stopped; load the engine again")
        futures: list[Future | None] = [
            self.executor.submit(
                _translate_in_worker, rows, search, None if phrases is None else phrases[b]
            )
            if rows
            else None
            for b, rows in enumerate(batches)
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


def _result(future: Future) -> Any:
    return pool_result(future, "a decoding worker stopped (out of memory?); try fewer --workers")


def load(module_name: str, models: list[str], config: TranslateConfig) -> ParallelEngine:
    """Check here (one-line errors, the dtype line) what the engine module ``module_name`` can
    tell without a model (its ``describe``), then start ``config.workers`` workers that each
    load the engine (its ``load``), and wait until they all have."""
    check_workers(config, config.search)
    if torch_device(config.device).type != "cpu":
        raise MtkitError(
            "--workers > 1 decodes on CPU; on a GPU give larger batches (--max-tokens) instead"
        )
    each = worker_config(config)
    info = importlib.import_module(module_name).describe(models, each)
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(config.workers)
    executor = ProcessPoolExecutor(
        config.workers,
        mp_context=context,
        initializer=_start_worker,
        initargs=(module_name, models, each, ready),
    )
    engine = ParallelEngine(
        config, info.src_tokenizer, info.tgt_tokenizer, info.max_positions, info.languages, executor
    )
    engine.trained_pieces = info.trained_pieces
    engine.sentence_style, engine.source_words = info.sentence_style, info.source_words
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


_worker: Engine | None = None
_ready: Any = None


def _start_worker(module_name: str, models: list[str], config: TranslateConfig, ready: Any) -> None:
    global _worker, _ready
    stop_with_parent()
    module = importlib.import_module(module_name)
    _worker, _ready = module.load(models, config, announce=False), ready


def _wait_for_the_others() -> int:
    """Returns once every worker has loaded (each holds one of these calls until then)."""
    _ready.wait(START_TIMEOUT_S)
    return os.getpid()


def _translate_in_worker(
    rows: list[list[int]], search: SearchConfig, phrases: list[Phrases] | None
) -> list[list[Translation]]:
    assert _worker is not None, "worker not initialised"
    return _worker.decode_batch(rows, search, phrases)
