"""Step-level batching in several decoding processes (`mtkit serve --decoders N`).

At the rows a server's load keeps in one running search (a few hundred), a compiled decoder
step on two threads is barely faster than on one (benchmarks/results/serve-decoders-*.txt): much
of a step is small kernels, the search and Python, which do not split across threads. N
processes of one thread each, every one with its own running search, use N cores for N times
the steps (CTranslate2's ``inter_threads``, with step-level batching inside each).

:class:`DecoderPool` takes a :class:`~mtkit.decoding.scheduler.Scheduler`'s place on the
engine (``decode``, ``stats``, ``busy``, ``close``). Rows whose search joins a running one go
to the processes, each to the one with the fewest source tokens in hand (a long text's rows
spread over all of them); every other search (constraints, alignments, sampling) runs on this
process's own scheduler. Each process loads the engine itself (the compiled graphs from the
cache this process built) and runs a scheduler; an input decodes there exactly as it would
alone on an engine of its threads. A request that goes away is cancelled in the processes at
their next step; a process that dies fails the rows it held and is started again.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import logging
import multiprocessing
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from torch import Tensor

from mtkit.config import TranslateConfig
from mtkit.decoding.hypotheses import Hypothesis
from mtkit.decoding.scheduler import Cancelled, Scheduler, SchedulerStats, cancellation
from mtkit.decoding.stepper import Stepper
from mtkit.errors import MtkitError
from mtkit.processes import stop_with_parent

log = logging.getLogger("mtkit.serve")
START_TIMEOUT_S = 600  # for a process to load the model
WATCH_S = 0.05  # how often the cancellations of the submissions in hand are looked at
STATS_TIMEOUT_S = 2.0  # for a process to say its counts


class DecoderLost(Exception):
    """A decoding process stopped (killed for memory, say) with these rows in hand, or none
    is running: the server's failure, for a while (a new process is started)."""


@dataclass(eq=False)
class _Part:
    """The rows of one submission that one process decodes."""

    rows: list[int]  # their places in the submission
    tokens: int
    cancelled: Callable[[], bool]
    done: threading.Event = field(default_factory=threading.Event)
    found: list[list[Hypothesis]] | None = None
    error: BaseException | None = None

    def finish(self, found: list[list[Hypothesis]] | None, error: BaseException | None) -> None:
        if not self.done.is_set():
            self.found, self.error = found, error
            self.done.set()


class _Decoder:
    """One decoding process, the pipe to it and the parts it holds."""

    def __init__(self, number: int, start: Callable[[], tuple[Any, Connection]]) -> None:
        self.number = number
        self.process, self.conn = start()
        self.parts: dict[int, _Part] = {}
        self.tokens = 0  # source tokens of the parts in hand
        self.stats = SchedulerStats()
        self.asked: dict[int, threading.Event] = {}  # stats asked for, by token
        self.lock = threading.Lock()

    def send(self, message: tuple) -> bool:
        with self.lock:
            try:
                self.conn.send(message)
            except (OSError, ValueError):  # the process is gone: its reader says so
                return False
        return True


class DecoderPool:
    """``count`` decoding processes, each loading the engine of module ``engine`` (its
    ``load``) over ``models`` with ``config`` and running a
    :class:`~mtkit.decoding.scheduler.Scheduler` (``max_tokens`` and ``share_tokens`` each),
    and ``local`` for the searches whose rows join none."""

    def __init__(
        self,
        engine: str,
        models: list[str],
        config: TranslateConfig,
        max_tokens: int,
        share_tokens: int | None,
        count: int,
        local: Scheduler,
    ) -> None:
        self.local = local
        self._args = (engine, models, config, max_tokens, share_tokens)
        self._context = multiprocessing.get_context("spawn")
        self._jobs = itertools.count()
        self._lock = threading.Lock()
        self._closed = False
        self._decoders: list[_Decoder] = []
        try:
            for number in range(count):  # (started together, then waited for)
                self._decoders.append(_Decoder(number, self._spawn))
            for decoder in self._decoders:
                self._wait_ready(decoder)
        except BaseException:
            self._kill()
            raise
        for decoder in self._decoders:
            self._read_in_background(decoder)
        threading.Thread(target=self._watch, name="mtkit-decoders-watch", daemon=True).start()

    # -----------------------------------------------------------------------------------------
    # The scheduler's interface

    def decode(
        self, rows: list[list[int]], key: Hashable | None, start: Callable[[Tensor], Stepper]
    ) -> list[list[Hypothesis]]:
        """As :meth:`Scheduler.decode`: rows with a ``key`` in the processes (``start`` is
        this process's search; a process starts its own from ``key``), the others here."""
        if key is None or not rows:
            return self.local.decode(rows, key, start)
        parts = self._submit(rows, key, cancellation())
        for part in parts.values():
            part.done.wait()
        found: list[list[Hypothesis]] = [[] for _ in rows]
        for part in parts.values():
            if part.error is not None:
                self._cancel(parts)
                raise part.error
            for i, hyps in zip(part.rows, part.found or [], strict=True):
                found[i] = hyps
        return found

    @property
    def stats(self) -> SchedulerStats:
        """The counts of every process and of this one's scheduler, summed (``most_rows``:
        the most of any)."""
        total = dataclasses.replace(self.local.stats)
        for decoder in list(self._decoders):
            stats = self._asked_stats(decoder)
            for name in (f.name for f in dataclasses.fields(SchedulerStats)):
                mine, theirs = getattr(total, name), getattr(stats, name)
                setattr(total, name, max(mine, theirs) if name == "most_rows" else mine + theirs)
        return total

    @property
    def busy(self) -> bool:
        return self.local.busy or any(d.parts for d in self._decoders)

    def close(self, timeout: float | None = None) -> bool:
        """Finish what was submitted, take nothing more; True if every process ended in time."""
        with self._lock:
            self._closed = True
        for decoder in self._decoders:
            decoder.send(("close",))
        ended = self.local.close(timeout)
        for decoder in self._decoders:
            decoder.process.join(timeout)
            ended = ended and not decoder.process.is_alive()
        self._kill()
        return ended

    # -----------------------------------------------------------------------------------------
    # This process's side

    def _submit(
        self, rows: list[list[int]], key: Hashable, cancelled: Callable[[], bool]
    ) -> dict[tuple[_Decoder, int], _Part]:
        """Each row to the process with the fewest source tokens in hand (counting those just
        given), one message a process."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the decoder is shut down")
            alive = [d for d in self._decoders if d.process.is_alive()]
            if not alive:
                raise DecoderLost("no decoding process is running (out of memory?)")
            given = {d: [] for d in alive}
            load = {d: d.tokens for d in alive}
            for i, row in enumerate(rows):
                decoder = min(alive, key=lambda d: (load[d], d.number))
                given[decoder].append(i)
                load[decoder] += len(row)
            parts = {}
            for decoder, index in given.items():
                if not index:
                    continue
                job = next(self._jobs)
                part = _Part(index, sum(len(rows[i]) for i in index), cancelled)
                decoder.parts[job] = part
                decoder.tokens += part.tokens
                parts[(decoder, job)] = part
        for (decoder, job), part in parts.items():
            if not decoder.send(("decode", job, [rows[i] for i in part.rows], key)):
                part.finish(None, DecoderLost("a decoding process stopped (out of memory?)"))
        return parts

    def _cancel(self, parts: dict[tuple[_Decoder, int], _Part]) -> None:
        for (decoder, job), part in parts.items():
            if not part.done.is_set():
                decoder.send(("cancel", job))

    def _watch(self) -> None:
        """Parts whose requests went away: cancelled in their processes, answered here."""
        while not self._closed:
            time.sleep(WATCH_S)
            with self._lock:
                held = [(d, job, p) for d in self._decoders for job, p in d.parts.items()]
            for decoder, job, part in held:
                if not part.done.is_set() and part.cancelled():
                    decoder.send(("cancel", job))
                    part.finish(None, Cancelled("the request went away"))

    def _read_in_background(self, decoder: _Decoder) -> None:
        name = f"mtkit-decoder-{decoder.number}"
        threading.Thread(target=self._read, args=(decoder,), name=name, daemon=True).start()

    def _read(self, decoder: _Decoder) -> None:
        """The process's answers, until its pipe closes; then its parts fail, and unless the
        pool is closing a new process takes its place."""
        while True:
            try:
                message = decoder.conn.recv()
            except (EOFError, OSError, pickle.UnpicklingError):
                break
            if message[0] == "done":
                _, job, found, error, stats = message
                decoder.stats = SchedulerStats(**stats)
                with self._lock:
                    part = decoder.parts.pop(job, None)
                    if part is not None:
                        decoder.tokens -= part.tokens
                if part is not None:
                    part.finish(found, error)
            elif message[0] == "stats":
                _, token, stats = message
                decoder.stats = SchedulerStats(**stats)
                asked = decoder.asked.pop(token, None)
                if asked is not None:
                    asked.set()
        self._lost(decoder)

    def _lost(self, decoder: _Decoder) -> None:
        with self._lock:
            parts, decoder.parts, decoder.tokens = list(decoder.parts.values()), {}, 0
            closed = self._closed
        if not closed:  # (closing: close() joins it; two threads' waits on one child race)
            decoder.process.join(5)
        code = decoder.process.exitcode
        error = DecoderLost(f"a decoding process stopped (exit status {code}; out of memory?)")
        for part in parts:
            part.finish(None, error)
        if closed:
            return
        log.warning(
            "decoding process %d stopped (exit status %s): starting another", decoder.number, code
        )
        try:
            fresh = _Decoder(decoder.number, self._spawn)
            self._wait_ready(fresh)
        except MtkitError as err:
            log.error("decoding process %d could not start again: %s", decoder.number, err)
            return
        with self._lock:
            self._decoders[self._decoders.index(decoder)] = fresh
        self._read_in_background(fresh)

    def _asked_stats(self, decoder: _Decoder) -> SchedulerStats:
        """The process's counts now (its last ones if it does not answer in time)."""
        token, asked = next(self._jobs), threading.Event()
        decoder.asked[token] = asked
        if decoder.send(("stats", token)):
            asked.wait(STATS_TIMEOUT_S)
        decoder.asked.pop(token, None)
        return decoder.stats

    def _spawn(self) -> tuple[Any, Connection]:
        mine, theirs = self._context.Pipe()
        process = self._context.Process(
            target=_decoder_main, args=(theirs, *self._args), name="mtkit-decoder", daemon=True
        )
        process.start()
        theirs.close()
        return process, mine

    def _wait_ready(self, decoder: _Decoder) -> None:
        """Until the process has loaded the engine; its failure in one line."""
        try:
            if not decoder.conn.poll(START_TIMEOUT_S):
                raise MtkitError(f"a decoding process did not start in {START_TIMEOUT_S} s")
            message = decoder.conn.recv()
        except (EOFError, OSError):
            decoder.process.join(5)
            raise MtkitError(
                f"a decoding process stopped while loading the model (exit status "
                f"{decoder.process.exitcode}; out of memory?)"
            ) from None
        if message[0] == "failed":
            raise MtkitError(f"a decoding process could not load the model: {message[1]}")

    def _kill(self) -> None:
        for decoder in self._decoders:
            if decoder.process.is_alive():
                decoder.process.kill()
            decoder.process.join(5)
            decoder.conn.close()


# ---------------------------------------------------------------------------------------------
# A decoding process


def _decoder_main(
    conn: Connection,
    module: str,
    models: list[str],
    config: TranslateConfig,
    max_tokens: int,
    share_tokens: int | None,
) -> None:
    """Load the engine, then decode what the pipe brings on a scheduler: until a ``close``
    (what was submitted is finished), or until the pipe closes (the server is gone: at once)."""
    stop_with_parent(death_signal=False)  # (started from threads that end: the pipe tells)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the server's to handle: it closes the pipe
    try:
        engine = importlib.import_module(module).load(models, config, announce=False)
        scheduler = engine.schedule(max_tokens, share_tokens)
        engine.translate(["warm up"], config.search)  # first-call costs here, not in a request
    except Exception as err:  # noqa: BLE001 - said to the server, which refuses to start
        conn.send(("failed", str(err) or type(err).__name__))
        return
    conn.send(("ready", os.getpid()))
    lock, gone = threading.Lock(), set()

    def send(message: tuple) -> None:
        with lock:
            try:
                conn.send(message)
            except (OSError, ValueError):  # the server is gone: so is this process, soon
                pass

    def answer(job: int, sub: Any) -> None:
        gone.discard(job)
        error = None if sub.error is None else _picklable(sub.error)
        found = sub.found if error is None else None
        send(("done", job, found, error, dataclasses.asdict(scheduler.stats)))

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            os._exit(0)  # nobody is left to answer
        if message[0] == "decode":
            _, job, rows, key = message
            scheduler.submit(
                rows,
                key,
                engine.starter(engine.models, key[0], None, True, key[1]),
                lambda job=job: job in gone,
                lambda sub, job=job: answer(job, sub),
            )
        elif message[0] == "cancel":
            gone.add(message[1])
        elif message[0] == "stats":
            send(("stats", message[1], dataclasses.asdict(scheduler.stats)))
        elif message[0] == "close":
            break
    scheduler.close()
    conn.close()


def _picklable(error: BaseException) -> BaseException:
    """``error`` itself where it crosses a pipe whole, else its message as an MtkitError."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # noqa: BLE001 - any failure to round-trip
        return MtkitError(str(error) or type(error).__name__)
    return error
