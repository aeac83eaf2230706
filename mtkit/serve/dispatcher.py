"""Step-level batching's front (``--batching step``, the default where the engine can): each
request is translated by ``engine.translate`` in a thread of its own (``POST /translate``: the
request's text thread itself, :meth:`Dispatcher.translate_now`, with no hand-over to a job
thread and back through the event loop; files: a job thread), and the searches of all of them
step together on the engine's one decoding thread (:mod:`mtkit.decoding.scheduler`):
a sentence that arrives while others decode joins them at the next step, and leaves (its
request answered) the step it ends. Everything around the search (the text layer's units,
the guard, detokenization) runs in the request's thread exactly as `mtkit translate` runs it,
so every answer is offline translation's.

A job whose request goes away (:meth:`Job.cancel`: its answer came too late, or its client
left) stops: its rows leave the running search at the next step and nothing more of it is
decoded. The same interface as :class:`~mtkit.serve.batcher.Batcher` (``submit``, ``waiting``,
``stats``, ``close``), which stays for engines that decode whole batches (CTranslate2,
``--workers``) and for ``--batching request``.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from mtkit.config import SearchConfig
from mtkit.decoding.scheduler import CANCELLED
from mtkit.engines.native import NativeEngine
from mtkit.serve.batcher import BatchStats, Closed, Job, QueueFull

JOB_THREADS = 64  # requests translated at once (their threads mostly wait on the decoder)


class Dispatcher:
    """Jobs, each ``engine.translate`` in a thread, their searches on one scheduler."""

    def __init__(
        self,
        engine: NativeEngine,
        max_tokens: int,
        queue_size: int,
        share_tokens: int = 0,
        decoders: int = 1,
    ) -> None:
        self.engine, self.queue_size = engine, queue_size
        self.scheduler = engine.schedule(max_tokens, share_tokens or max_tokens, decoders)
        self._stats = BatchStats()
        self._jobs: set[Job] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._pool = ThreadPoolExecutor(JOB_THREADS, thread_name_prefix="mtkit-job")

    def start(self) -> Dispatcher:
        return self

    def submit(
        self, lines: list[str], search: SearchConfig, phrases: list[list[str]] | None = None
    ) -> Job:
        """Translate ``lines`` with ``search`` (each line with its constraint ``phrases``, for
        a search with a constraint kind); raises QueueFull or Closed."""
        job = self._taken(Job(lines, search, 0, phrases))
        self._pool.submit(self._translate, job)
        return job

    def translate_now(
        self,
        lines: list[str],
        search: SearchConfig,
        phrases: list[list[str]] | None,
        gone: threading.Event,
    ) -> list:
        """:meth:`submit`'s translation in the calling thread (a request's text thread, which
        would only wait for the job's): no hand-over to a job thread and back. Raises
        QueueFull or Closed as :meth:`submit` does, and
        :class:`~mtkit.decoding.scheduler.Cancelled` once ``gone`` is set (the request's
        answer was given, or its client left: its rows leave at the next step)."""
        job = self._taken(Job(lines, search, 0, phrases))
        token = CANCELLED.set(gone.is_set)
        try:
            found = self.engine.translate(lines, search, constraints=phrases)
        finally:
            CANCELLED.reset(token)
            self._leave(job)
        self._record(job)
        return found

    def _taken(self, job: Job) -> Job:
        """``job`` counted among those being translated; raises QueueFull or Closed."""
        with self._lock:
            if self._closed:
                raise Closed("the server is shutting down")
            if len(self._jobs) >= self.queue_size:
                raise QueueFull(f"{len(self._jobs)} requests are being translated (--queue-size)")
            self._jobs.add(job)
        return job

    @property
    def waiting(self) -> int:
        """Jobs submitted and not answered yet."""
        with self._lock:
            return len(self._jobs)

    def close(self, timeout: float | None = None) -> bool:
        """Take no more jobs, finish those taken; True if all ended in ``timeout``."""
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=True)
        return self.scheduler.close(timeout)

    def _translate(self, job: Job) -> None:
        """Translate ``job``; it leaves the queue before its answer is given, so that a client
        that has its answer finds the room it took free again."""
        if not job.future.set_running_or_notify_cancel():
            self._leave(job)
            return
        token = CANCELLED.set(job.gone.is_set)
        try:
            found = self.engine.translate(job.lines, job.search, constraints=job.phrases)
        except BaseException as err:  # noqa: BLE001 - the request's answer: its error
            self._leave(job)
            job.future.set_exception(err)
        else:
            self._record(job)
            self._leave(job)
            job.future.set_result(found)
        finally:
            CANCELLED.reset(token)

    def _leave(self, job: Job) -> None:
        with self._lock:
            self._jobs.discard(job)

    def _record(self, job: Job) -> None:
        with self._lock:
            self._stats.jobs += 1
            self._stats.lines += len(job.lines)

    @property
    def stats(self) -> BatchStats:
        """Jobs and lines answered, and as ``batches`` the searches started (asked of the
        scheduler when read: decoding processes answer through their pipes)."""
        with self._lock:
            stats = BatchStats(jobs=self._stats.jobs, lines=self._stats.lines)
        stats.batches = self.scheduler.stats.started
        return stats
