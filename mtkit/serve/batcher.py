"""Batching across requests: a bounded queue and one model worker.

Requests (:class:`Job`: some lines and the search options they want) wait in arrival order.
One worker thread takes the oldest job, waits until ``max_wait`` has passed since it arrived
(no wait at all when it has already waited that long, e.g. behind a busy model) or until the
jobs with the same search options fill ``max_tokens``, then translates all of them with one
``engine.translate`` call and hands each job its own lines back, in order. Jobs with other
search options wait for a batch of their own; the oldest job always goes in the next batch,
so none waits for ever. A job larger than the budget runs alone.

Example, ``max_tokens=10`` and jobs arriving as a(4 tokens, beam 5), b(3, beam 2),
c(4, beam 5), d(5, beam 5): the batches are [a, c], then [b], then [d].

A batch that fails is run again one job at a time, so a request that breaks the engine fails
alone. The worker knows nothing of HTTP; the server awaits the futures that :meth:`submit`
returns (``asyncio.wrap_future``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from mtkit.config import SearchConfig
from mtkit.engines.base import Engine, Translation

Results = list[list[Translation]]


class QueueFull(Exception):
    """The queue holds ``queue_size`` jobs already."""


class Closed(Exception):
    """The batcher is shutting down and takes no more jobs."""


@dataclass
class Job:
    """One request: its lines, the search it wants, its size in source tokens."""

    lines: list[str]
    search: SearchConfig
    tokens: int
    future: Future = field(default_factory=Future)  # -> Results, one entry per line
    arrived: float = field(default_factory=time.monotonic)


@dataclass
class BatchStats:
    """What the worker did: for tests, the benchmark and the log."""

    batches: int = 0
    jobs: int = 0
    lines: int = 0
    sizes: list[int] = field(default_factory=list)  # jobs per batch, the latest 1000


class Batcher:
    """A bounded queue of jobs and the one thread that runs them through ``engine``."""

    def __init__(
        self,
        engine: Engine,
        max_tokens: int,
        max_wait: float,
        queue_size: int,
        count_tokens: Callable[[Sequence[str]], int] | None = None,
    ) -> None:
        self.engine = engine
        self.max_tokens, self.max_wait, self.queue_size = max_tokens, max_wait, queue_size
        self.count_tokens = count_tokens or whitespace_tokens
        self.stats = BatchStats()
        self._pending: list[Job] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="mtkit-model", daemon=True)

    def start(self) -> Batcher:
        self._thread.start()
        return self

    def submit(self, lines: list[str], search: SearchConfig) -> Job:
        """Queue ``lines`` for translation with ``search``; raises QueueFull or Closed."""
        job = Job(lines, search, self.count_tokens(lines))
        with self._cond:
            if self._closed:
                raise Closed("the server is shutting down")
            if len(self._pending) >= self.queue_size:
                raise QueueFull(f"{len(self._pending)} requests are waiting (--queue-size)")
            self._pending.append(job)
            self._cond.notify()
        return job

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._pending)

    def close(self, timeout: float | None = None) -> bool:
        """Take no more jobs, finish the queued ones; True if the worker ended in ``timeout``."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    # -----------------------------------------------------------------------------------------
    # The worker

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            self._translate(batch)

    def _next_batch(self) -> list[Job] | None:
        """The next batch to run (cancelled jobs left out); None once closed and drained."""
        with self._cond:
            while True:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return None
                oldest = self._pending[0]
                batch, full = self._fill(oldest)
                deadline = oldest.arrived + self.max_wait
                while not full and not self._closed and time.monotonic() < deadline:
                    self._cond.wait(deadline - time.monotonic())
                    batch, full = self._fill(oldest)
                for job in batch:
                    self._pending.remove(job)
                batch = [job for job in batch if job.future.set_running_or_notify_cancel()]
                if batch:
                    return batch

    def _fill(self, oldest: Job) -> tuple[list[Job], bool]:
        """``oldest`` and, in arrival order, the waiting jobs with its search that fit; and
        whether the batch is full (the budget reached, or a job with its search left out)."""
        batch, tokens, full = [oldest], oldest.tokens, oldest.tokens >= self.max_tokens
        for job in self._pending[1:]:
            if job.search != oldest.search:
                continue
            if tokens + job.tokens <= self.max_tokens:
                batch.append(job)
                tokens += job.tokens
            else:
                full = True
        return batch, full

    def _translate(self, batch: list[Job]) -> None:
        lines = [line for job in batch for line in job.lines]
        try:
            results = self.engine.translate(lines, batch[0].search)
        except Exception as err:
            if len(batch) == 1:
                batch[0].future.set_exception(err)
                return
            for job in batch:  # find the culprit: the others still get their answers
                self._translate_alone(job)
            return
        self._record(batch, len(lines))
        start = 0
        for job in batch:
            job.future.set_result(results[start : start + len(job.lines)])
            start += len(job.lines)

    def _translate_alone(self, job: Job) -> None:
        try:
            results = self.engine.translate(job.lines, job.search)
        except Exception as err:
            job.future.set_exception(err)
        else:
            self._record([job], len(job.lines))
            job.future.set_result(results)

    def _record(self, batch: list[Job], lines: int) -> None:
        stats = self.stats
        stats.batches += 1
        stats.jobs += len(batch)
        stats.lines += lines
        stats.sizes = [*stats.sizes[-999:], len(batch)]


def whitespace_tokens(lines: Sequence[str]) -> int:
    """A stand-in for source pieces where no tokenizer is given: words + EOS per line."""
    return sum(len(line.split()) + 1 for line in lines)
