"""The step-level scheduler: submissions from many threads decode on one thread, joining a
running search, each with exactly the hypotheses it gets alone; a short one arriving during a
long decode is answered first; a cancelled one stops being computed; a failure stays its own."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from mtkit.config import SearchConfig
from mtkit.data.tokenizer import EOS_ID, PAD_ID
from mtkit.decoding.scheduler import CANCELLED, Cancelled, Scheduler
from mtkit.decoding.search import generate, joinable, start_search
from tests.model.model_helpers import tiny

BEAM = SearchConfig(beam=3, nbest=2, max_len_b=9)
GREEDY = SearchConfig(beam=1, max_len_b=9)
SAMPLING = SearchConfig(beam=1, sampling=True, nbest=2, max_len_b=9, seed=3)
LONG = SearchConfig(beam=2, max_len_a=0.0, max_len_b=70, min_len=70)


def rows(n: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 12, (n,), generator=g).tolist()
    return [torch.randint(4, 23, (k,), generator=g).tolist() + [EOS_ID] for k in lengths]


def padded(batch: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(batch), max(map(len, batch))), PAD_ID)
    for i, row in enumerate(batch):
        out[i, : len(row)] = torch.tensor(row)
    return out


def tokens(found) -> list[list[tuple]]:
    return [[tuple(h.tokens) for h in hyps] for hyps in found]


def submit(scheduler: Scheduler, model, batch, cfg: SearchConfig, generator=None):
    key = cfg if joinable(cfg) and generator is None else None
    return scheduler.decode(
        batch, key, lambda src: start_search([model], src, cfg, generator, joining=key is not None)
    )


@pytest.fixture
def scheduler():
    made = Scheduler(max_tokens=60, device=torch.device("cpu"), pad=PAD_ID)
    yield made
    assert made.close(30)


def test_submissions_from_many_threads_get_what_they_get_alone(scheduler: Scheduler) -> None:
    model = tiny()
    work = [(rows(1 + i % 4, seed=i), (BEAM, GREEDY)[i % 2]) for i in range(16)]
    with torch.inference_mode():
        expected = [tokens(generate([model], padded(batch), cfg)) for batch, cfg in work]

    def one(i: int):
        time.sleep(0.002 * i)  # arrivals spread over the running decode
        return tokens(submit(scheduler, model, *work[i]))

    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(one, range(16)))
    assert got == expected
    assert scheduler.stats.joined > 0  # rows did join running searches
    assert scheduler.stats.most_rows > 4


def test_the_decoding_threads_seconds_are_counted_where_they_went(scheduler: Scheduler) -> None:
    model = tiny()
    time.sleep(0.2)  # nothing submitted yet: the thread waits
    start = time.perf_counter()
    with torch.inference_mode():
        submit(scheduler, model, rows(3, seed=1), BEAM)
    took = time.perf_counter() - start
    stats = scheduler.stats
    assert 0.15 < stats.idle < 0.2 + took  # (its wait ended when the rows came)
    assert stats.intakes == 1 and 0 < stats.starting and 0 < stats.stepping
    assert stats.starting + stats.stepping < took


def test_searches_that_take_no_joiners_run_beside_the_others(scheduler: Scheduler) -> None:
    model = tiny()
    batch = rows(3, seed=5)
    with torch.inference_mode():
        alone = tokens(generate([model], padded(batch), SAMPLING, torch.Generator().manual_seed(3)))
    with ThreadPoolExecutor(2) as pool:
        beam = pool.submit(submit, scheduler, model, rows(4, seed=6), BEAM)
        sampled = submit(scheduler, model, batch, SAMPLING, torch.Generator().manual_seed(3))
        beam.result()
    assert tokens(sampled) == alone


def test_a_short_submission_during_a_long_decode_is_answered_first(scheduler: Scheduler):
    model = tiny()
    ended: dict[str, float] = {}

    def timed(name: str, batch, cfg: SearchConfig) -> None:
        submit(scheduler, model, batch, cfg)
        ended[name] = time.monotonic()

    long = threading.Thread(target=timed, args=("long", rows(2, seed=7), LONG))
    long.start()
    while scheduler.stats.steps < 5:
        time.sleep(0.001)
    timed("short", rows(1, seed=8), GREEDY)
    long.join()
    assert ended["short"] < ended["long"]
    assert scheduler.stats.steps >= 70


def cancelled_mid_decode(scheduler: Scheduler, decode) -> list[BaseException]:
    """``decode()`` run in a thread whose request goes away once the decoder has made 5
    steps: the Cancelled it raised (none if it was not cancelled)."""
    gone = threading.Event()
    raised: list[BaseException] = []

    def cancelled_one() -> None:
        CANCELLED.set(gone.is_set)
        try:
            decode()
        except Cancelled as err:
            raised.append(err)

    thread = threading.Thread(target=cancelled_one)
    thread.start()
    while scheduler.stats.steps < 5:
        time.sleep(0.001)
    gone.set()
    thread.join(30)
    return raised


def test_a_cancelled_submission_stops_being_decoded(scheduler: Scheduler) -> None:
    model = tiny()
    raised = cancelled_mid_decode(scheduler, lambda: submit(scheduler, model, rows(2, 9), LONG))
    assert raised and scheduler.stats.dropped == 2
    steps = scheduler.stats.steps
    time.sleep(0.05)
    assert scheduler.stats.steps == steps < 70  # nothing of it computed after it left
    assert not scheduler.busy


def test_a_cancelled_search_that_cannot_drop_inputs_ends_and_the_decoder_goes_on(
    scheduler: Scheduler,
) -> None:
    """A search that cannot drop inputs (a constrained one) decodes one submission alone;
    that submission gone, the search ends, and the decoding thread serves the next one."""
    model = tiny()

    def cannot_drop(keep: list[int]) -> None:
        raise NotImplementedError("a constrained search cannot drop inputs")

    def alone(src: torch.Tensor):
        search = start_search([model], src, LONG)
        search.left = cannot_drop
        return search

    raised = cancelled_mid_decode(scheduler, lambda: scheduler.decode(rows(2, 9), None, alone))
    assert raised and scheduler.stats.dropped == 2 and scheduler.stats.steps < 70
    with torch.inference_mode():
        expected = tokens(generate([model], padded(rows(3, seed=10)), BEAM))
    assert tokens(submit(scheduler, model, rows(3, seed=10), BEAM)) == expected
    assert not scheduler.busy


def test_a_search_failing_outside_its_step_fails_its_submissions_not_the_decoder(
    scheduler: Scheduler,
) -> None:
    model = tiny()

    def broken(src: torch.Tensor):
        search = start_search([model], src, GREEDY)
        search.finished = lambda: 1 / 0  # (handed out right after it starts)
        return search

    with pytest.raises(ZeroDivisionError):
        scheduler.decode(rows(2, seed=11), None, broken)
    with torch.inference_mode():
        expected = tokens(generate([model], padded(rows(3, seed=10)), BEAM))
    assert tokens(submit(scheduler, model, rows(3, seed=10), BEAM)) == expected


def test_a_failing_search_fails_its_own_submission_only(scheduler: Scheduler) -> None:
    model = tiny()

    def broken(src):
        raise RuntimeError("broken search")

    with ThreadPoolExecutor(2) as pool:
        good = pool.submit(submit, scheduler, model, rows(3, seed=10), BEAM)
        with pytest.raises(RuntimeError, match="broken search"):
            scheduler.decode(rows(2, seed=11), None, broken)
        with torch.inference_mode():
            expected = tokens(generate([model], padded(rows(3, seed=10)), BEAM))
        assert tokens(good.result()) == expected


def test_a_search_that_took_many_inputs_takes_no_more(scheduler: Scheduler, monkeypatch) -> None:
    """Under steady traffic a search would never end: past MAX_INPUTS a new one starts."""
    import mtkit.decoding.scheduler as scheduling

    monkeypatch.setattr(scheduling, "MAX_INPUTS", 3)
    model = tiny()
    long = threading.Thread(target=submit, args=(scheduler, model, rows(3, seed=12), LONG))
    long.start()
    while scheduler.stats.steps < 3:
        time.sleep(0.001)
    submit(scheduler, model, rows(1, seed=13), LONG)  # the first search holds 3 inputs already
    long.join()
    assert scheduler.stats.started == 2 and scheduler.stats.joined == 0
