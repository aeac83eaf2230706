"""Encoding a parallel corpus's chunks with sentencepiece, in worker processes: what
`mtkit prepare` (:mod:`mtkit.pipeline.prepare`) streams its splits through.

A :class:`ChunkEncoder` encodes a chunk of pairs with the source and target models and applies
the length filters; an :class:`EncoderPool` runs it in ``workers`` processes (each loads the
models once; started on first need, at most ``2 * workers`` chunks in flight, results in corpus
order) or, for one chunk or ``workers`` 0, in this process, where a pool cannot help. A worker
that dies (out of memory) is named in a one-line error.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import chain, compress, islice
from typing import Any, NamedTuple

import numpy as np

from mtkit.data.cleaning import length_mask
from mtkit.data.tokenizer import Tokenizer
from mtkit.processes import pool_result, stop_now, stop_with_parent

# source lines, target lines, apply the length filters, the tag id to prepend (-1: none)
Job = tuple[list[str], list[str], bool, int]


class Encoded(NamedTuple):
    """One encoded chunk: the kept pairs as flat ids plus lengths, per side."""

    src: np.ndarray
    src_lengths: np.ndarray
    tgt: np.ndarray
    tgt_lengths: np.ndarray
    keep: np.ndarray  # (n,) bool over the chunk's input pairs
    dropped: dict[str, int]


class ChunkEncoder:
    """Encodes chunks of pairs with the source and target models; applies the length filters."""

    def __init__(
        self, src_state: tuple, tgt_state: tuple, max_tokens: int, max_ratio: float, dtype: str
    ) -> None:
        self.src = Tokenizer.from_state(*src_state)  # Tokenizer.state(): picklable for workers
        self.tgt = Tokenizer.from_state(*tgt_state)
        self.max_tokens, self.max_ratio, self.dtype = max_tokens, max_ratio, np.dtype(dtype)

    def _encode(self, tok: Tokenizer, lines: list[str]) -> tuple[list[list[int]], np.ndarray]:
        ids = tok.encode(lines, threads=1)
        return ids, np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))

    def _flat(self, ids: list[list[int]], total: int) -> np.ndarray:
        return np.fromiter(chain.from_iterable(ids), dtype=self.dtype, count=total)

    def __call__(self, job: Job) -> Encoded:
        src_lines, tgt_lines, filtered, tag_id = job
        src_ids, src_len = self._encode(self.src, src_lines)
        tgt_ids, tgt_len = self._encode(self.tgt, tgt_lines)
        keep, dropped = np.ones(len(src_ids), dtype=bool), {}
        if filtered:
            keep, dropped = length_mask(src_len, tgt_len, self.max_tokens, self.max_ratio)
            if not keep.all():
                src_ids, tgt_ids = list(compress(src_ids, keep)), list(compress(tgt_ids, keep))
                src_len, tgt_len = src_len[keep], tgt_len[keep]
        if tag_id >= 0:  # after the filters: a tag does not count toward them
            src_ids, src_len = [[tag_id, *ids] for ids in src_ids], src_len + 1
        src_flat = self._flat(src_ids, int(src_len.sum()))
        tgt_flat = self._flat(tgt_ids, int(tgt_len.sum()))
        return Encoded(src_flat, src_len, tgt_flat, tgt_len, keep, dropped)


_worker_encoder: ChunkEncoder | None = None


def _init_worker(*args: Any) -> None:
    global _worker_encoder
    stop_with_parent()
    _worker_encoder = ChunkEncoder(*args)


def _encoded(result: Future) -> Encoded:
    return pool_result(
        result, "an encoding worker stopped (out of memory?); try fewer --workers, or --workers 0"
    )


def _encode_in_worker(job: Job) -> Encoded:
    assert _worker_encoder is not None, "worker not initialised"
    return _worker_encoder(job)


class EncoderPool:
    """Encodes jobs in order, in ``workers`` processes (started on first need) or in this one."""

    def __init__(self, args: tuple[Any, ...], workers: int) -> None:
        self.args, self.workers = args, workers
        self.local = ChunkEncoder(*args)
        self.pool: ProcessPoolExecutor | None = None
        self.jobs_in_workers = 0

    def map(self, jobs: Iterator[Job]) -> Iterator[tuple[Job, Encoded]]:
        head = list(islice(jobs, 2))
        if self.workers < 1 or len(head) < 2:  # one chunk (or none): a pool cannot help
            for job in chain(head, jobs):
                yield job, self.local(job)
            return
        if self.pool is None:
            context = multiprocessing.get_context()  # the platform's default, as before
            self.pool = ProcessPoolExecutor(
                self.workers, mp_context=context, initializer=_init_worker, initargs=self.args
            )
        # submit over a window rather than map(): map submits every job at once, draining the
        # reader without limit; the window bounds memory and keeps read errors in this thread
        pending: deque[tuple[Job, Future]] = deque()
        for job in chain(head, jobs):
            pending.append((job, self.pool.submit(_encode_in_worker, job)))
            self.jobs_in_workers += 1
            if len(pending) > 2 * self.workers:
                done, result = pending.popleft()
                yield done, _encoded(result)
        while pending:
            done, result = pending.popleft()
            yield done, _encoded(result)

    def __enter__(self) -> EncoderPool:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self.pool is not None:
            if exc_type is None:
                self.pool.shutdown()
            else:
                stop_now(self.pool)
