"""Step-level batching through the real server process: a sentence sent while a long request
decodes is answered before it, equal to offline translation; a request answered 504 stops
being decoded at once; ``--batching request`` (whole batches) still answers the same."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from serve_helpers import best, sentences

SENTENCES = sentences(60, seed=7)
# every output 40 pieces; the decoder takes 64 source pieces at a time (a long request: waves)
FORCED = ["--min-len", "40", "--max-len-b", "40", "--no-guard", "--max-batch-tokens", "64"]


def decoder(server) -> dict:
    return server.get("/health").body


def test_a_sentence_sent_during_a_long_request_is_answered_first(start_server: Callable, ckpt):
    server = start_server(*FORCED)
    with ThreadPoolExecutor(1) as pool:
        long = pool.submit(server.translate, {"q": SENTENCES[:40]})
        deadline = time.monotonic() + 30
        while decoder(server)["steps"] < 5:  # the long request is decoding
            assert time.monotonic() < deadline
            time.sleep(0.01)
        single = server.translate({"q": SENTENCES[50]})
        assert not long.done()  # answered while the long request still decodes
        reply = long.result(120)
    expected = best(ckpt, SENTENCES[:40] + [SENTENCES[50]], *FORCED[:5])
    assert (single.status, single.body) == (200, {"translatedText": expected[-1]})
    assert (reply.status, reply.body) == (200, {"translatedText": expected[:40]})
    assert decoder(server)["joined"] > 0
    assert server.stop() == 0


def test_a_request_answered_504_stops_being_decoded(start_server: Callable, ckpt) -> None:
    # outputs of 70 pieces in waves of 32 source pieces: several times the timeout anywhere
    # (2.5 s without it); the single sentence after it, 70 steps too, must fit in the timeout
    # under CI's load (0.25 s did not, once)
    slow = ["--min-len", "70", "--max-len-b", "70", "--no-guard", "--max-batch-tokens", "32"]
    server = start_server(*slow, "--timeout", "0.45")
    reply = server.translate({"q": SENTENCES[:60]})
    assert (reply.status, reply.body["field"]) == (504, "timeout")
    deadline = time.monotonic() + 10
    while decoder(server)["dropped"] == 0:  # its rows leave at the next step
        assert time.monotonic() < deadline
        time.sleep(0.01)
    steps = decoder(server)["steps"]
    time.sleep(0.3)
    assert decoder(server)["steps"] == steps  # nothing of it computed after its answer
    start = time.monotonic()
    single = server.translate({"q": SENTENCES[50]})
    assert single.status == 200 and time.monotonic() - start < 0.5
    assert server.stop() == 0


def test_whole_request_batching_answers_the_same(start_server: Callable, ckpt) -> None:
    server = start_server("--batching", "request")
    assert decoder(server)["batching"] == "request"
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda s: server.translate({"q": s}), SENTENCES[:16]))
    expected = best(ckpt, SENTENCES[:16])
    assert [r.body["translatedText"] for r in replies] == expected
    assert server.stop() == 0
