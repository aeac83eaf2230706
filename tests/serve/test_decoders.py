"""Step-level batching in decoding processes (mtkit.engines.decoders.DecoderPool): answers equal
offline translation for every search kind (the joining ones in the processes, the others in
this one), a long text's rows spread over the processes, a request that goes away is dropped
in its process, a process that dies fails only its rows and is replaced, one that cannot load
is refused in one line; `mtkit serve --decoders 2` answers as `mtkit translate`."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
import torch
from serve_helpers import best, random_checkpoint, sentences

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.decoding.scheduler import CANCELLED, Cancelled, Scheduler
from mtkit.engines import load_engine
from mtkit.engines.decoders import DecoderLost, DecoderPool
from mtkit.errors import MtkitError
from mtkit.pipeline.serve import decoders

LINES = sentences(24, seed=5)
SEARCHES = {
    "beam": SearchConfig(beam=2, max_len_a=0.0, max_len_b=6),
    "greedy": SearchConfig(beam=1, max_len_a=0.0, max_len_b=6),
    "nbest": SearchConfig(beam=3, nbest=3, max_len_a=0.0, max_len_b=6),
    "constrained": SearchConfig(beam=2, max_len_a=0.0, max_len_b=6, constraints="unordered"),
}
# Decoding a request whose process is told it went away, or is killed, while it decodes: 500
# steps of a wider model (~1 s), so that it is still decoding when the news arrives (the pool
# looks at its requests every WATCH_S, 50 ms; 60 steps of the tiny model could end before that)
LONG = SearchConfig(beam=2, min_len=500, max_len_a=0.0, max_len_b=500, guard=False)


def texts(found: list) -> list[list[str]]:
    return [[h.text for h in hyps] for hyps in found]


@pytest.fixture(scope="module")
def offline(ckpt: str):
    return load_engine([ckpt], TranslateConfig(threads=1))


def pool_of(ckpt: str):
    engine = load_engine([ckpt], TranslateConfig(threads=1))
    pool = engine.schedule(2048, 64, decoders=2)
    assert isinstance(pool, DecoderPool)
    yield engine
    assert pool.close(30)


@pytest.fixture(scope="module")
def pooled(ckpt: str):
    yield from pool_of(ckpt)


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A model whose decoding steps take a millisecond or more, for :data:`LONG`."""
    path = tmp_path_factory.mktemp("slow") / "slow.pt"
    return random_checkpoint(path, d_model=256, ffn_dim=1024, heads=4, max_positions=600)


@pytest.fixture(scope="module")
def slow_pooled(slow: str):
    yield from pool_of(slow)


@pytest.mark.parametrize("kind", list(SEARCHES))
def test_answers_equal_offline_translation(kind: str, offline, pooled) -> None:
    search = SEARCHES[kind]
    phrases = [[line.split()[0]] for line in LINES] if search.constraints else None
    expected = texts(offline.translate(LINES, search, constraints=phrases))
    started = pooled.scheduler.stats.started
    assert texts(pooled.translate(LINES, search, constraints=phrases)) == expected
    # a request's rows spread over both processes: a search started in each (constraints:
    # one here, beside them)
    assert pooled.scheduler.stats.started - started == (1 if search.constraints else 2)

    def single(i: int) -> list:
        return pooled.translate([LINES[i]], search, constraints=phrases and [phrases[i]])[0]

    with ThreadPoolExecutor(8) as threads:  # single sentences joining running searches
        one = list(threads.map(single, range(12)))
    assert texts(one) == expected[:12]


def test_a_request_that_goes_away_is_dropped_in_its_process(slow_pooled) -> None:
    gone, raised = threading.Event(), []

    def request() -> None:
        token = CANCELLED.set(gone.is_set)
        try:
            slow_pooled.translate(LINES[:4], LONG)
        except Cancelled as err:
            raised.append(err)
        finally:
            CANCELLED.reset(token)

    pool = slow_pooled.scheduler
    steps, dropped = pool.stats.steps, pool.stats.dropped
    thread = threading.Thread(target=request)
    thread.start()
    deadline = time.monotonic() + 30
    while pool.stats.steps < steps + 3:  # decoding in the processes
        assert time.monotonic() < deadline
    gone.set()
    thread.join(30)
    assert raised
    while pool.busy or pool.stats.dropped < dropped + 4:  # its rows left at their next steps
        assert time.monotonic() < deadline
        time.sleep(0.01)
    steps = pool.stats.steps
    time.sleep(0.2)
    assert pool.stats.steps == steps  # nothing of it decoded since


def test_a_process_that_dies_fails_its_rows_alone_and_is_replaced(slow, slow_pooled) -> None:
    engine, pool = slow_pooled, slow_pooled.scheduler
    offline = load_engine([slow], TranslateConfig(threads=1))
    steps = pool.stats.steps
    with ThreadPoolExecutor(1) as thread:
        long = thread.submit(engine.translate, LINES[:1], LONG)
        deadline = time.monotonic() + 30
        while pool.stats.steps < steps + 3:
            assert time.monotonic() < deadline
        (holder,) = [d for d in pool._decoders if d.parts]
        holder.process.kill()
        with pytest.raises(DecoderLost, match="a decoding process stopped"):
            long.result(30)
    search = SEARCHES["beam"]
    expected = texts(offline.translate(LINES, search))
    assert texts(engine.translate(LINES, search)) == expected  # the other one, meanwhile
    while holder in pool._decoders:  # replaced
        assert time.monotonic() < deadline + 60
        time.sleep(0.05)
    assert all(d.process.is_alive() for d in pool._decoders)
    (fresh,) = [d for d in pool._decoders if d.number == holder.number]
    before = pool._asked_stats(fresh).steps
    assert texts(engine.translate(LINES, search)) == expected
    assert pool._asked_stats(fresh).steps > before  # the new process decoded some of them


def test_a_process_that_cannot_load_is_refused_in_one_line(tmp_path) -> None:
    local = Scheduler(2048, torch.device("cpu"), 0)
    missing = str(tmp_path / "gone.pt")
    with pytest.raises(MtkitError, match="a decoding process could not load the model: ") as err:
        DecoderPool(
            "mtkit.engines.native", [missing], TranslateConfig(threads=1), 2048, 64, 1, local
        )
    assert "\n" not in str(err.value) and "gone.pt" in str(err.value)
    assert local.close(5)


def test_auto_decoders_one_per_thread_on_a_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu, gpu = (
        SimpleNamespace(device=torch.device("cpu")),
        SimpleNamespace(device=torch.device("cuda")),
    )
    for threads, count in ((1, 1), (2, 2), (3, 3), (16, 4)):
        monkeypatch.setattr(torch, "get_num_threads", lambda threads=threads: threads)
        assert decoders(cpu, 0) == count
        assert decoders(gpu, 0) == 1
        assert decoders(cpu, 3) == 3


def test_mtkit_serve_with_decoding_processes_answers_as_translate(start_server, ckpt) -> None:
    server = start_server("--decoders", "2", "--threads", "2")
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda s: server.translate({"q": s}), LINES[:12]))
        many = server.translate({"q": LINES[12:]})
    expected = best(ckpt, LINES)
    assert [(r.status, r.body["translatedText"]) for r in replies] == [
        (200, text) for text in expected[:12]
    ]
    assert (many.status, many.body["translatedText"]) == (200, expected[12:])
    health = server.get("/health").body
    assert health["batching"] == "step" and health["steps"] > 0
    assert "2 decoding processes" in server.stderr()
    assert server.stop() == 0
