"""The step-level front of the server (mtkit.serve.dispatcher.Dispatcher), without HTTP: jobs
answered as offline translation answers them, a bounded number at once, none after close,
and a cancelled job's rows dropped from the running search."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from serve_helpers import sentences

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.decoding.scheduler import Cancelled
from mtkit.engines import load_engine
from mtkit.serve.batcher import Closed, QueueFull
from mtkit.serve.dispatcher import Dispatcher

LINES = sentences(6, seed=3)
LONG = SearchConfig(beam=2, min_len=60, max_len_a=0.0, max_len_b=60, guard=False)


@pytest.fixture
def engine(ckpt: str):
    return load_engine([ckpt], TranslateConfig(threads=1))


def test_jobs_are_answered_as_offline_translation(engine) -> None:
    search = SearchConfig(beam=2, max_len_a=0.0, max_len_b=6)
    expected = engine.translate(LINES, search)
    dispatcher = Dispatcher(engine, 2048, 8)
    jobs = [dispatcher.submit([line], search) for line in LINES]
    got = [job.future.result(60)[0] for job in jobs]
    assert [[h.text for h in hyps] for hyps in got] == [[h.text for h in e] for e in expected]
    assert dispatcher.close(30) and dispatcher.stats.jobs == len(LINES)
    with pytest.raises(Closed):
        dispatcher.submit(["a man"], search)


def test_a_full_queue_and_a_cancelled_job(engine) -> None:
    dispatcher = Dispatcher(engine, 2048, 1)
    job = dispatcher.submit(LINES[:2], LONG)
    with pytest.raises(QueueFull):
        dispatcher.submit(["a man"], LONG)
    deadline = time.monotonic() + 30
    while dispatcher.scheduler.stats.steps < 3:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    job.cancel()
    with pytest.raises(Cancelled):
        job.future.result(30)
    assert dispatcher.scheduler.stats.dropped == 2 and dispatcher.scheduler.stats.steps < 60
    assert dispatcher.close(30)


def test_translate_now_in_the_callers_thread(engine) -> None:
    search = SearchConfig(beam=2, max_len_a=0.0, max_len_b=6)
    expected = engine.translate(LINES, search)
    dispatcher = Dispatcher(engine, 2048, 1)
    got = dispatcher.translate_now(LINES, search, None, threading.Event())
    assert [[h.text for h in hyps] for hyps in got] == [[h.text for h in e] for e in expected]
    assert dispatcher.waiting == 0 and dispatcher.stats.jobs == 1
    gone = threading.Event()
    with ThreadPoolExecutor(1) as pool:  # a request's text thread, decoding a long job
        running = pool.submit(dispatcher.translate_now, LINES[:2], LONG, None, gone)
        deadline = time.monotonic() + 30
        while dispatcher.scheduler.stats.steps < 3:
            assert time.monotonic() < deadline
            time.sleep(0.001)
        with pytest.raises(QueueFull):  # it holds the one place
            dispatcher.translate_now(["a man"], search, None, threading.Event())
        gone.set()  # its request was answered (a 504), or its client left
        with pytest.raises(Cancelled):
            running.result(30)
    assert dispatcher.scheduler.stats.dropped == 2 and dispatcher.waiting == 0
    assert dispatcher.close(30)
    with pytest.raises(Closed):
        dispatcher.translate_now(["a man"], search, None, threading.Event())
