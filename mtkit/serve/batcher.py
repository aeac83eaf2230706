"""Batching across requests: a bounded queue and one model worker.

Requests (:class:`Job`: some lines and the search options they want) wait in arrival order.
One worker thread takes the oldest job, waits until ``max_wait`` has passed since it arrived
(no wait at all when it has already waited that long, e.g. behind a busy model) or until the
jobs with the same search options fill ``max_tokens``, then translates all of them with one
``engine.translate`` call and hands each job its own lines back, in order. Jobs with other
search options wait for a batch of their own; the oldest job always goes in the next batch,
so none waits for ever. Without slicing (``slice_tokens`` 0), a job larger than the budget
runs alone.

Long work in slices: with ``slice_tokens`` > 0, a job of more tokens than that (a long text,
hundreds of sentences) is handed out a slice of its lines at a time, at most ``slice_tokens``
tokens of such jobs per batch; the rest of the batch goes to the short jobs waiting beside it.
A long request then no longer holds the model for seconds while single sentences queue behind
it: each batch stays small, every batch takes some short jobs, and the long job finishes
after its last slice (its answer is the same: each line is translated on its own whatever
batch it is in).

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


@dataclass(eq=False)
class Job:
    """One request: its lines, the search it wants, its size in source tokens."""

    lines: list[str]
    search: SearchConfig
    tokens: int
    phrases: list[list[str]] | None = None  # per line: its constraints (a constrained search)
    future: Future = field(default_factory=Future)  # -> Results, one entry per line
    arrived: float = field(default_factory=time.monotonic)
    line_tokens: list[int] = field(default_factory=list)  # per line: a sliced job's
    given: int = 0  # lines handed out to batches so far (a sliced job)
    results: Results = field(default_factory=list)  # a sliced job's results so far
    running: bool = False  # its future is running (a sliced job's first slice was taken)
    gone: threading.Event = field(default_factory=threading.Event)  # :meth:`cancel` was called

    def cancel(self) -> None:
        """Its request went away: not translated if not started (a step-level job stops at
        the next step: :mod:`mtkit.serve.dispatcher`)."""
        self.gone.set()
        self.future.cancel()


@dataclass(frozen=True)
class Part:
    """Lines ``start:end`` of a job, in one batch."""

    job: Job
    start: int
    end: int

    @property
    def lines(self) -> list[str]:
        return self.job.lines[self.start : self.end]

    @property
    def last(self) -> bool:
        return self.end == len(self.job.lines)

    @property
    def phrases(self) -> list[list[str]]:
        """Each line's constraints ([] each for a job without any)."""
        given = self.job.phrases
        return given[self.start : self.end] if given is not None else [[] for _ in self.lines]


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
        slice_tokens: int = 0,
    ) -> None:
        self.engine = engine
        self.max_tokens, self.max_wait, self.queue_size = max_tokens, max_wait, queue_size
        self.slice_tokens = slice_tokens
        self.count_tokens = count_tokens or whitespace_tokens
        self.stats = BatchStats()
        self._pending: list[Job] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="mtkit-model", daemon=True)

    def start(self) -> Batcher:
        self._thread.start()
        return self

    def submit(
        self, lines: list[str], search: SearchConfig, phrases: list[list[str]] | None = None
    ) -> Job:
        """Queue ``lines`` for translation with ``search`` (each line with its constraint
        ``phrases``, for a search with a constraint kind); raises QueueFull or Closed."""
        job = Job(lines, search, self.count_tokens(lines), phrases)
        if self._sliced(job):
            job.line_tokens = [self.count_tokens([line]) for line in lines]
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

    def _sliced(self, job: Job) -> bool:
        return 0 < self.slice_tokens < job.tokens and len(job.lines) > 1

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            self._translate(batch)

    def _next_batch(self) -> list[Part] | None:
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
                batch = [part for part in batch if self._take(part)]
                if batch:
                    return batch

    def _take(self, part: Part) -> bool:
        """Hand ``part`` out (its job leaves the queue with its last part); False for a job
        cancelled before its first part."""
        job = part.job
        job.given = part.end
        if part.last:
            self._pending.remove(job)
        if job.running:
            return True
        job.running = job.future.set_running_or_notify_cancel()
        if not job.running and not part.last:
            self._pending.remove(job)
        return job.running

    def _fill(self, oldest: Job) -> tuple[list[Part], bool]:
        """``oldest`` (or its next slice) and, in arrival order, the waiting jobs with its
        search that fit (long jobs: slices, at most ``slice_tokens`` of them per batch); and
        whether the batch is full (the budget reached, or a job with its search left out)."""
        batch: list[Part] = []
        tokens, sliced, full = 0, 0, False
        for job in self._pending:
            if job.search != oldest.search:
                continue
            if self._sliced(job):
                budget = min(self.slice_tokens - sliced, self.max_tokens - tokens)
                part, size = self._slice(job, budget, job is oldest)
                sliced += size
            else:
                fits = job is oldest or tokens + job.tokens <= self.max_tokens
                part, size = (Part(job, 0, len(job.lines)), job.tokens) if fits else (None, 0)
            if part is None:
                full = True
                continue
            batch.append(part)
            tokens += size
            full = full or tokens >= self.max_tokens
        return batch, full

    def _slice(self, job: Job, budget: int, first: bool) -> tuple[Part | None, int]:
        """The job's next lines within ``budget`` tokens (at least one line when ``first``)."""
        end, size = job.given, 0
        while end < len(job.lines) and size + job.line_tokens[end] <= budget:
            size += job.line_tokens[end]
            end += 1
        if end == job.given and first:
            size, end = job.line_tokens[end], end + 1
        return (Part(job, job.given, end), size) if end > job.given else (None, 0)

    def _translate(self, batch: list[Part]) -> None:
        lines = [line for part in batch for line in part.lines]
        try:
            results = _translated(self.engine, batch)
        except Exception as err:
            if len(batch) == 1:
                self._fail(batch[0].job, err)
                return
            for part in batch:  # find the culprit: the others still get their answers
                self._translate_alone(part)
            return
        self._record(batch, len(lines))
        start = 0
        for part in batch:
            self._deliver(part, results[start : start + len(part.lines)])
            start += len(part.lines)

    def _translate_alone(self, part: Part) -> None:
        if part.job.future.done():  # an earlier part of it failed
            return
        try:
            results = _translated(self.engine, [part])
        except Exception as err:
            self._fail(part.job, err)
        else:
            self._record([part], len(part.lines))
            self._deliver(part, results)

    def _deliver(self, part: Part, results: Results) -> None:
        job = part.job
        if job.future.done():
            return
        job.results.extend(results)
        if part.last:
            job.future.set_result(job.results)

    def _fail(self, job: Job, err: Exception) -> None:
        """The job fails (its remaining slices are not translated)."""
        with self._cond:
            if job in self._pending:
                self._pending.remove(job)
        if not job.future.done():
            job.future.set_exception(err)

    def _record(self, batch: list[Part], lines: int) -> None:
        stats = self.stats
        stats.batches += 1
        stats.jobs += sum(part.last for part in batch)
        stats.lines += lines
        stats.sizes = [*stats.sizes[-999:], len(batch)]


def _translated(engine: Engine, batch: list[Part]) -> Results:
    """The batch's lines through ``engine`` with their jobs' search (the same for all), each
    line with its own job's constraints where the search has a constraint kind."""
    lines = [line for part in batch for line in part.lines]
    search = batch[0].job.search
    if not search.constraints:
        return engine.translate(lines, search)
    return engine.translate(lines, search, constraints=[p for part in batch for p in part.phrases])


def whitespace_tokens(lines: Sequence[str]) -> int:
    """A stand-in for source pieces where no tokenizer is given: words + EOS per line."""
    return sum(len(line.split()) + 1 for line in lines)
