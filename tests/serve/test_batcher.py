"""The cross-request batcher with a fake engine: exact outputs, batches, errors, the queue."""

from __future__ import annotations

import threading
import time

import pytest
from serve_helpers import FakeEngine, hold, started, texts

from mtkit.config import SearchConfig
from mtkit.serve.batcher import Closed, QueueFull

BEAM5, BEAM2 = SearchConfig(), SearchConfig(beam=2)


def test_each_request_gets_its_own_lines_in_order() -> None:
    engine = FakeEngine()
    batcher = started(engine, max_tokens=1000)
    gate = hold(engine, batcher)
    jobs = [
        batcher.submit([f"job {i} line {k}" for k in range(i % 3 + 1)] + [""], BEAM5)
        for i in range(12)
    ]
    engine.release.set()
    assert texts(gate) == ["GATE"]
    for i, job in enumerate(jobs):
        assert texts(job) == [f"JOB {i} LINE {k}" for k in range(i % 3 + 1)] + [""]
    assert len(engine.calls) == 2  # the gate, then all twelve in one batch
    batcher.close(5)


def test_batches_group_by_search_within_the_token_budget() -> None:
    # the module docstring's example: a(4, beam 5) b(3, beam 2) c(4, beam 5) d(5, beam 5)
    engine = FakeEngine()
    batcher = started(engine, max_tokens=10)
    gate = hold(engine, batcher)
    a = batcher.submit(["a a a"], BEAM5)  # 3 words + EOS = 4 tokens
    b = batcher.submit(["b b"], BEAM2)
    c = batcher.submit(["c c c"], BEAM5)
    d = batcher.submit(["d d d d"], BEAM5)
    engine.release.set()
    assert [texts(job) for job in (gate, a, b, c, d)] == [
        ["GATE"],
        ["A A A"],
        ["B B"],
        ["C C C"],
        ["D D D D"],
    ]
    assert [(lines, search.width) for lines, search in engine.calls] == [
        (["gate"], 5),
        (["a a a", "c c c"], 5),
        (["b b"], 2),
        (["d d d d"], 5),
    ]
    assert batcher.stats.sizes == [1, 2, 1, 1]
    batcher.close(5)


def test_a_job_larger_than_the_budget_runs_alone() -> None:
    engine = FakeEngine()
    batcher = started(engine, max_tokens=4)
    gate = hold(engine, batcher)
    big, small = batcher.submit(["x " * 20], BEAM5), batcher.submit(["y"], BEAM5)
    engine.release.set()
    assert texts(gate) == ["GATE"] and texts(big) == ["X " * 20] and texts(small) == ["Y"]
    assert [lines for lines, _ in engine.calls[1:]] == [["x " * 20], ["y"]]
    batcher.close(5)


def test_the_wait_limit_lets_later_requests_join() -> None:
    engine = FakeEngine()
    batcher = started(engine, max_tokens=100, max_wait=0.5)
    first = batcher.submit(["one"], BEAM5)
    time.sleep(0.1)
    second = batcher.submit(["two"], BEAM5)
    assert texts(first) == ["ONE"] and texts(second) == ["TWO"]
    assert [lines for lines, _ in engine.calls] == [["one", "two"]]
    batcher.close(5)


def test_no_wait_runs_one_request_at_a_time() -> None:
    engine = FakeEngine()
    batcher = started(engine, max_tokens=2, max_wait=0.0)
    jobs = [batcher.submit([f"s{i}"], BEAM5) for i in range(5)]
    assert [texts(job) for job in jobs] == [[f"S{i}"] for i in range(5)]
    assert all(len(lines) == 1 for lines, _ in engine.calls)
    batcher.close(5)


def test_one_failing_request_does_not_fail_the_others() -> None:
    engine = FakeEngine()
    batcher = started(engine, max_tokens=100)
    gate = hold(engine, batcher)
    good1 = batcher.submit(["fine"], BEAM5)
    bad = batcher.submit(["boom"], BEAM5)
    good2 = batcher.submit(["also fine", "x"], BEAM5)
    engine.release.set()
    assert texts(gate) == ["GATE"]
    assert texts(good1) == ["FINE"] and texts(good2) == ["ALSO FINE", "X"]
    with pytest.raises(RuntimeError, match="boom"):
        bad.future.result(timeout=5)
    assert [lines for lines, _ in engine.calls[1:]] == [
        ["fine", "boom", "also fine", "x"],
        ["fine"],
        ["boom"],
        ["also fine", "x"],
    ]
    later = batcher.submit(["after"], BEAM5)  # the worker goes on
    assert texts(later) == ["AFTER"]
    batcher.close(5)


def test_a_full_queue_refuses_and_close_finishes_what_waits() -> None:
    engine = FakeEngine()
    batcher = started(engine, queue_size=2)
    gate = hold(engine, batcher)
    waiting = [batcher.submit(["p"], BEAM5), batcher.submit(["q"], BEAM2)]
    with pytest.raises(QueueFull):
        batcher.submit(["r"], BEAM5)
    assert batcher.waiting == 2
    closer = threading.Thread(target=batcher.close, args=(5,))
    closer.start()
    time.sleep(0.05)
    with pytest.raises(Closed):
        batcher.submit(["s"], BEAM5)
    engine.release.set()
    closer.join(5)
    assert texts(gate) == ["GATE"] and [texts(job) for job in waiting] == [["P"], ["Q"]]
    assert batcher.close(1)  # the worker has ended


def test_a_cancelled_request_is_not_translated() -> None:
    engine = FakeEngine()
    batcher = started(engine)
    gate = hold(engine, batcher)
    gone, kept = batcher.submit(["gone"], BEAM5), batcher.submit(["kept"], BEAM5)
    assert gone.future.cancel()  # what a timed-out request does
    engine.release.set()
    assert texts(gate) == ["GATE"] and texts(kept) == ["KEPT"]
    assert ["gone"] not in [lines for lines, _ in engine.calls]
    batcher.close(5)


def test_a_long_job_goes_in_slices_beside_the_short_ones() -> None:
    """slice_tokens 6: the long job (8 lines of 3 tokens) gives each batch two lines, the short
    jobs fill the rest of the budget (12); every answer as a batch of its own would give."""
    engine = FakeEngine()
    batcher = started(engine, max_tokens=12, slice_tokens=6)
    gate = hold(engine, batcher)
    long = batcher.submit([f"l{i} x" for i in range(8)], BEAM5)  # 8 lines of 3 tokens
    short = [batcher.submit([f"s{i}"], BEAM5) for i in range(6)]  # 2 tokens each
    engine.release.set()
    assert texts(gate) == ["GATE"] and texts(long) == [f"L{i} X" for i in range(8)]
    assert [texts(job) for job in short] == [[f"S{i}"] for i in range(6)]
    assert [lines for lines, _ in engine.calls[1:]] == [
        ["l0 x", "l1 x", "s0", "s1", "s2"],
        ["l2 x", "l3 x", "s3", "s4", "s5"],
        ["l4 x", "l5 x"],
        ["l6 x", "l7 x"],
    ]
    assert batcher.stats.sizes[1:] == [4, 4, 1, 1] and batcher.stats.jobs == 8
    batcher.close(5)


def test_a_failing_slice_fails_its_job_alone() -> None:
    engine = FakeEngine()
    batcher = started(engine, max_tokens=12, slice_tokens=6)
    gate = hold(engine, batcher)
    long = batcher.submit(["a x", "b x", "boom", "c x", "d x"], BEAM5)
    short = batcher.submit(["s"], BEAM5)
    engine.release.set()
    assert texts(gate) == ["GATE"] and texts(short) == ["S"]
    with pytest.raises(RuntimeError, match="boom"):
        long.future.result(timeout=5)
    assert not any("d x" in lines for lines, _ in engine.calls)  # its last slice never ran
    assert batcher.waiting == 0
    batcher.close(5)


def test_a_long_job_cancelled_before_its_first_slice_is_not_translated() -> None:
    engine = FakeEngine()
    batcher = started(engine, max_tokens=12, slice_tokens=6)
    gate = hold(engine, batcher)
    long = batcher.submit([f"l{i} x" for i in range(8)], BEAM5)
    assert long.future.cancel()
    short = batcher.submit(["s"], BEAM5)
    engine.release.set()
    assert texts(gate) == ["GATE"] and texts(short) == ["S"]
    assert [lines for lines, _ in engine.calls[1:]] == [["s"]] and batcher.waiting == 0
    batcher.close(5)
