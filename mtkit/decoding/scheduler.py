"""Iteration-level scheduling (Orca, Yu et al., OSDI 2022; vLLM's continuous batching), for
every search: one thread decodes everything submitted, one step at a time.

Callers (a server's request threads) hand a batch of source rows to :meth:`Scheduler.decode`
and wait. Between two steps the scheduler takes in what was submitted: the rows of a search
that takes inputs joining it (greedy decoding and beam search:
:attr:`~mtkit.decoding.stepper.Stepper.joinable`) join the running search of the same kind and
options (``key``), as many as the budget allows; any other batch (constrained, sampling,
speculative, alignments) starts a search of its own, stepped beside the others. Each input is
handed back the moment its last row leaves, each submission answered when its last input is;
an input decodes exactly as it would alone (:mod:`mtkit.decoding.stepper`).

The budget: source tokens being decoded, ``max_tokens``; submissions take turns, one input
each per round, so a single sentence gets in within a few steps of arriving while a long text
fills whatever the others leave (alone, the whole budget). A submission whose ``cancelled``
says so (its request timed out, or its client went away) leaves at the next step: its rows
are dropped and nothing more of it is computed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch
from torch import Tensor

from mtkit.decoding.batching import pad_batch
from mtkit.decoding.hypotheses import Hypothesis
from mtkit.decoding.stepper import Stepper

# rows are taken in every this many steps: each intake encodes its rows and grows the caches
# (a few ms), so rows arriving one a step join in pairs (a step's wait, at most, for each)
JOIN_EVERY = 2
# a search that has taken this many inputs takes no more (it drains, a new one starts): a
# server's search under steady traffic would otherwise never end, and its per-input
# bookkeeping (a few integers each) grow for ever
MAX_INPUTS = 10_000
# what a request thread's decodes ask to know whether their request is still wanted
CANCELLED: ContextVar[Callable[[], bool] | None] = ContextVar("mtkit_cancelled", default=None)


class Cancelled(Exception):
    """The submission's request went away: its rows were dropped."""


@dataclass(eq=False)
class Submission:
    """Source rows (ids + EOS) waiting for their hypotheses."""

    rows: list[list[int]]
    key: Hashable | None  # rows with one key join one running search; None: a search alone
    start: Callable[[Tensor], Stepper]  # the search over some of the rows (B, S)
    cancelled: Callable[[], bool]
    found: list[list[Hypothesis]] = field(default_factory=list)
    taken: int = 0  # rows admitted so far
    live: int = 0  # source tokens of its rows being decoded
    left: int = 0  # rows not handed back yet
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    on_done: Callable[[Submission], None] | None = None  # called once, on the decoding thread

    def finish(self, error: BaseException | None = None) -> None:
        if not self.done.is_set():
            self.error = error
            self.done.set()
            if self.on_done is not None:
                self.on_done(self)


@dataclass(eq=False)
class Running:
    """A search being stepped and whose input each of its inputs is."""

    search: Stepper
    key: Hashable | None
    owners: dict[int, tuple[Submission, int]] = field(default_factory=dict)


@dataclass
class SchedulerStats:
    """What the scheduler did: for tests, the benchmark and the log."""

    steps: int = 0  # steps of any search
    started: int = 0  # searches started
    joined: int = 0  # inputs that joined a running search
    dropped: int = 0  # inputs dropped (their requests gone)
    most_rows: int = 0  # the most inputs decoded at once
    idle: float = 0.0  # seconds the decoding thread waited with nothing to decode
    starting: float = 0.0  # seconds spent starting and joining rows (encoding them)
    stepping: float = 0.0  # seconds spent in steps and handing out
    intakes: int = 0  # calls that started or joined rows


class Scheduler:
    """One thread stepping every running search; :meth:`decode` submits rows and waits."""

    def __init__(
        self, max_tokens: int, device: torch.device, pad: int, share_tokens: int | None = None
    ) -> None:
        self.max_tokens, self.device, self.pad = max_tokens, device, pad
        self.share_tokens = max_tokens if share_tokens is None else share_tokens
        self.join_every = JOIN_EVERY
        self.stats = SchedulerStats()
        self._pending: list[Submission] = []
        self._running: list[Running] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="mtkit-decode", daemon=True)
        self._thread.start()

    def decode(
        self, rows: list[list[int]], key: Hashable | None, start: Callable[[Tensor], Stepper]
    ) -> list[list[Hypothesis]]:
        """Each row's hypotheses, as ``start(src)(...)`` run alone would give them; rows with
        a ``key`` may join a running search of that key. Raises :class:`Cancelled` once the
        calling context's :data:`CANCELLED` says so, or what the search raised."""
        if not rows:
            return []
        sub = self.submit(rows, key, start, cancellation())
        sub.done.wait()
        if sub.error is not None:
            raise sub.error
        return sub.found

    def submit(
        self,
        rows: list[list[int]],
        key: Hashable | None,
        start: Callable[[Tensor], Stepper],
        cancelled: Callable[[], bool],
        on_done: Callable[[Submission], None] | None = None,
    ) -> Submission:
        """:meth:`decode` without the wait: the submission, ``done`` once its rows are (its
        ``found`` or its ``error`` set, ``on_done`` called on the decoding thread)."""
        sub = Submission(rows, key, start, cancelled, [[] for _ in rows], left=len(rows))
        sub.on_done = on_done
        if not rows:
            sub.finish()
            return sub
        with self._cond:
            if self._closed:
                raise RuntimeError("the decoder is shut down")
            self._pending.append(sub)
            self._cond.notify()
        return sub

    def close(self, timeout: float | None = None) -> bool:
        """Finish what was submitted, take nothing more; True if the thread ended in time."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def busy(self) -> bool:
        with self._cond:
            return bool(self._pending or self._running)

    # -----------------------------------------------------------------------------------------
    # The decoding thread

    def _run(self) -> None:
        rounds = 0  # steps since rows were last taken in
        with torch.inference_mode():
            while True:
                with self._cond:
                    if not (self._pending or self._running or self._closed):
                        waited = time.perf_counter()
                        while not (self._pending or self._running or self._closed):
                            self._cond.wait()
                        self.stats.idle += time.perf_counter() - waited
                    if self._closed and not (self._pending or self._running):
                        return
                    rounds += 1
                    admitted = []
                    if rounds >= self.join_every or not self._running:
                        admitted, rounds = self._admit(), 0
                try:
                    self._drop_cancelled()
                    began = time.perf_counter()
                    for key, parts in admitted:
                        self._start(key, parts)
                        self.stats.intakes += 1
                    stepped = time.perf_counter()
                    for running in list(self._running):
                        self._step(running)
                    self.stats.starting += stepped - began
                    self.stats.stepping += time.perf_counter() - stepped
                except Exception as err:  # noqa: BLE001 - the searches in hand fail, not the thread
                    for running in list(self._running):
                        self._fail(running, err)

    def _admit(self) -> list[tuple[Hashable | None, list[tuple[Submission, int]]]]:
        """Rows to take in now, grouped by key, in submission order: a batch without a key
        whole; a keyed submission's rows one per submission and round, its first at once, the
        others while the budget allows: ``max_tokens`` in all, and ``share_tokens`` of its own
        while other submissions decode or wait (alone, a long text takes the whole budget)."""
        used = sum(len(sub.rows[row]) for r in self._running for sub, row in r.owners.values())
        groups: dict[Hashable | None, list[tuple[Submission, int]]] = {}
        alone: list[tuple[Hashable | None, list[tuple[Submission, int]]]] = []
        for sub in [s for s in self._pending if s.key is None]:
            alone.append((None, [(sub, i) for i in range(len(sub.rows))]))
            sub.taken = len(sub.rows)
            used += sum(len(row) for row in sub.rows)
        owners = {id(sub) for r in self._running for sub, _ in r.owners.values()}
        shared = len(owners | {id(sub) for sub in self._pending}) > 1
        took = True
        while took:
            took = False
            for sub in self._pending:
                if sub.key is None or sub.taken == len(sub.rows):
                    continue
                size = len(sub.rows[sub.taken])
                if sub.live and (
                    used + size > self.max_tokens
                    or (shared and sub.live + size > self.share_tokens)
                ):
                    continue
                groups.setdefault(sub.key, []).append((sub, sub.taken))
                sub.taken += 1
                sub.live += size
                used += size
                took = True
        self._pending = [s for s in self._pending if s.taken < len(s.rows)]
        return alone + list(groups.items())

    def _start(self, key: Hashable | None, parts: list[tuple[Submission, int]]) -> None:
        """The rows ``parts`` join the running search of ``key``, or start one."""
        src = pad_batch([sub.rows[i] for sub, i in parts], self.device, self.pad)
        running = next(
            (
                r
                for r in self._running
                if key is not None and r.key == key and len(r.search.limits) < MAX_INPUTS
            ),
            None,
        )
        try:
            if running is None:
                running = Running(parts[0][0].start(src), key)
                self._running.append(running)
                inputs = list(range(len(parts)))
                self.stats.started += 1
            else:
                inputs = running.search.join(src)
                self.stats.joined += len(parts)
        except Exception as err:  # noqa: BLE001 - the submissions fail, the server goes on
            for sub, _ in parts:
                sub.finish(err)
            if running is not None:  # a join that failed half-way: that search is lost too
                self._fail(running, err)
            return
        for i, (sub, row) in zip(inputs, parts, strict=True):
            running.owners[i] = (sub, row)
        live = sum(len(r.owners) for r in self._running)
        self.stats.most_rows = max(self.stats.most_rows, live)
        self._hand_out(running)

    def _step(self, running: Running) -> None:
        try:
            if not running.search.done:
                running.search.step()
                self.stats.steps += 1
            self._hand_out(running)
        except Exception as err:  # noqa: BLE001 - the search's submissions fail, the rest go on
            self._fail(running, err)

    def _fail(self, running: Running, err: BaseException) -> None:
        if running in self._running:
            self._running.remove(running)
        for sub, _ in running.owners.values():
            sub.finish(err)

    def _hand_out(self, running: Running) -> None:
        for i, hyps in running.search.finished():
            sub, row = running.owners.pop(i)
            sub.live -= len(sub.rows[row])
            sub.found[row] = hyps
            sub.left -= 1
            if sub.left == 0:
                sub.finish()
        if not running.owners and running in self._running:
            self._running.remove(running)

    def _drop_cancelled(self) -> None:
        """Submissions whose requests went away: dropped from the queue and the searches."""
        gone: set[Submission] = set()
        with self._cond:
            gone.update(sub for sub in self._pending if _gone(sub))
            self._pending = [s for s in self._pending if s not in gone]
        for running in list(self._running):
            dropped = {i for i, (sub, _) in running.owners.items() if sub in gone or _gone(sub)}
            if not dropped:
                continue
            gone.update(running.owners[i][0] for i in dropped)
            if len(dropped) < len(running.owners):  # (a search alone is one submission's)
                try:
                    running.search.drop(dropped)
                except Exception as err:  # noqa: BLE001 - its submissions fail, the rest go on
                    self._fail(running, err)
                    continue
            for i in dropped:
                sub, row = running.owners.pop(i)
                sub.live -= len(sub.rows[row])
            self.stats.dropped += len(dropped)
            if not running.owners:  # all of it gone: the search ends here
                self._running.remove(running)
        for sub in gone:
            sub.finish(Cancelled("the request went away"))  # (a failed one keeps its error)


def _gone(sub: Submission) -> bool:
    """Its request went away, or another of its rows failed."""
    return sub.error is not None or sub.cancelled()


def cancellation() -> Callable[[], bool]:
    """The calling context's :data:`CANCELLED` test; outside a request, one that never says so."""
    return CANCELLED.get() or _never


def _never() -> bool:
    return False
