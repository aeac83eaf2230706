"""Worker processes that belong to the command that started them.

`mtkit prepare` encodes and `mtkit translate --workers N` decodes in pools of worker processes
(``concurrent.futures.ProcessPoolExecutor``); each worker calls :func:`stop_with_parent` first,
so that Ctrl-C and a dying main process end the workers quietly instead of leaving them running
or printing tracebacks, and an error or a signal in the main process ends a pool with
:func:`stop_now`.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import sys
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from mtkit.errors import MtkitError

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


def stop_with_parent(death_signal: bool = True) -> None:
    """Ctrl-C is the main process's to handle (it stops the pool: :func:`stop_now`); SIGTERM
    ends a worker quietly (the handler forked from the main process is undone); and on Linux a
    worker dies with it, even by SIGKILL, instead of printing a traceback when it returns its
    result. The kernel closes a dying process's pipes before it sends the death signal, so a
    worker can still write its result into the closed result pipe in between: SIGPIPE's
    default action ends it there just as quietly (Python's own ignores SIGPIPE and raises
    BrokenPipeError, which the pool would print). ``death_signal`` False: no death signal (it
    comes when the *thread* that started the process ends; a process started from a thread
    that ends before it must watch its pipe instead)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if death_signal and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def stop_now(pool: ProcessPoolExecutor) -> None:
    """End a pool's workers at once, dropping the jobs they hold (an error or a signal in the
    main process: nobody will read those results), so that this process can exit at once.

    A worker killed in the middle of writing a result leaves half a message in the result
    pipe. The pool's manager thread, reading it, would wait for the rest forever: this process
    holds the pipe's write end too, so no end of file comes; and the interpreter joins that
    thread at exit, so the command would never end (it had cleaned up and said so). This
    process never writes results: closing its write end turns the half message into an end of
    file once the workers are dead, which the pool takes for a broken pool; it then closes the
    job pipe's read end too, which ends its feeder thread, blocked on a full pipe nobody reads.
    SIGKILL ends a worker that has not yet undone the signal handlers forked from this process.
    (``multiprocessing.Pool.terminate`` can hang likewise: a worker killed while it holds the
    result queue's lock leaves the lock taken. Python 3.14's ``terminate_workers`` does not
    close the pipe.)"""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    results = getattr(pool, "_result_queue", None)  # None once the pool is shut down
    manager = getattr(pool, "_executor_manager_thread", None)
    for process in processes:
        process.kill()
    if results is not None:
        results._writer.close()
    pool.shutdown(wait=False, cancel_futures=True)
    if manager is not None:  # let it finish closing its wake-up pipe now: at exit the
        # interpreter wakes it through that pipe, and a close under way then raises "Bad file
        # descriptor" (printed as an ignored exception) between its check and its write
        manager.join(timeout=10)


def pool_result(future: Future, broken: str) -> Any:
    """``future``'s result; a pool broken by a worker that died (killed for memory, say)
    becomes a one-line MtkitError saying ``broken``."""
    try:
        return future.result()
    except BrokenProcessPool:
        raise MtkitError(broken) from None
