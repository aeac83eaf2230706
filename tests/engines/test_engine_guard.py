"""The decoding guard in the engine skeleton (mtkit.engines.guard): a line whose translation
degenerates is translated again, lowercased, in parts, or squeezed, with a warning; a clean
line, or one whose source holds the run itself, is never touched."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import replace

import pytest
from guard_helpers import GARBAGE, Scripted, caps_garbage

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.decoding.guard import CHAR_RUN, char_runs
from mtkit.decoding.scheduler import CANCELLED, Cancelled
from mtkit.engines.base import Translation
from mtkit.engines.confidence import Confidence
from mtkit.engines.guard import joined_translation

LONG = " ".join(["the red dog runs on the blue street"] * 15)  # 120 words, 120 pieces


def copy(source: str) -> str:
    return f"de: {source}"


def test_clean_lines_are_never_touched(capsys) -> None:
    lines = ["a man rides", "A Man", "A man rides.", "", LONG, "Aaaaaaaaaaaa", "zzzzzzzzzzzz"]
    engine = Scripted(copy)
    found = engine.translate(lines)
    assert found == engine.translate(lines, SearchConfig(guard=False))
    assert [h[0].text for h in found if h] == [copy(line) for line in lines if line]
    assert all(h.guard is None for hyps in found for h in hyps)
    assert len(engine.seen) == 2 * 6  # no retry
    assert "warning" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("source", "want"),
    [
        ("A Man", "De: A Man"),  # Title Case of two words: not recased from the start
        ("A man rides a bike.", "De: a man rides a bike."),
        ("the DOG runs", "de: the dog runs"),
    ],
)
def test_a_cased_line_is_translated_lowercased_its_case_put_back(source, want, capsys) -> None:
    engine = Scripted(caps_garbage)
    [[hyp]] = engine.translate([source], first_number=7)
    assert (hyp.text, hyp.guard) == (want, "lowercased")
    assert engine.sources() == [source, source.lower()]
    err = capsys.readouterr().err
    assert err == (
        "mtkit translate: warning: line 7: a degenerate translation (a run of 12 'G'); "
        "translated again lowercased, its case put back\n"
    )


@pytest.mark.parametrize(
    ("source", "want"),
    [
        ("A MAN RIDES A BIKE.", "DE: A MAN RIDES A BIKE."),
        ("NASA", "DE: NASA"),
        ("A Man Rides Home", "De: A Man Rides Home"),
        (">>de<< A MAN RIDES", "DE: >>DE<< A MAN RIDES"),  # the tag kept as it is
    ],
)
def test_all_caps_and_title_case_are_translated_lowercased_from_the_start(
    source, want, capsys
) -> None:
    engine = Scripted(copy)
    [[hyp]] = engine.translate([source])
    assert (hyp.text, hyp.guard) == (want, "recased")
    tag, _, body = source.rpartition("<< ")
    assert engine.sources() == [f"{tag}<< {body.lower()}" if tag else source.lower()]
    assert capsys.readouterr().err == ""  # no warning: nothing went wrong
    plain = Scripted(copy)
    [[hyp]] = plain.translate([source], SearchConfig(guard=False))
    assert (hyp.text, hyp.guard, plain.sources()) == (copy(source), None, [source])


def test_a_constrained_all_caps_line_is_translated_as_it_is() -> None:
    engine = Scripted(copy)
    search = SearchConfig(constraints="unordered")
    [[hyp]] = engine.translate(["A DOG RUNS"], search, constraints=[["Hund"]])
    assert hyp.guard is None and engine.sources() == ["A DOG RUNS"]


def test_a_source_that_holds_the_run_itself_is_no_degeneration(capsys) -> None:
    engine = Scripted(lambda source: source.lower())
    found = engine.translate(["Aaaaaaaaaaaa", "zzzzzzzzzzzz now", "Hmmmmmmmmmmmm"])
    assert [h[0].guard for h in found] == [None, None, None]
    assert capsys.readouterr().err == ""
    longer = Scripted(lambda source: source + "zz")  # two more than the source has: fires
    [[hyp]] = longer.translate(["zzzzzzzzzzzz"])
    assert hyp.guard == "squeezed" and hyp.text == "zzzzzzzzzzzz"


def test_a_long_line_is_translated_in_parts(capsys) -> None:
    engine = Scripted(lambda s: "Ein verddddbbbbbbbbbb" if len(s.split()) > 64 else copy(s))
    [[hyp]] = engine.translate([LONG], SearchConfig(scores=True))
    parts = [s for s in engine.sources()[1:]]
    assert len(parts) == 2 and " ".join(parts) == LONG  # cut at words, in order
    assert all(len(engine.src_tokenizer.encode([p])[0]) <= 64 for p in parts)
    assert hyp.guard == "split"
    assert hyp.text == " ".join(copy(p) for p in parts)
    assert hyp.score == -2.0 and hyp.logprob == -4.0  # summed
    assert hyp.confidence is not None and len(hyp.confidence.words) == len(hyp.text.split())
    assert "line 1: a degenerate translation (a run of 10 'b'); translated again in parts" in (
        capsys.readouterr().err
    )


def test_a_long_line_cut_short_is_translated_in_parts_not_lowercased(capsys) -> None:
    run_on = "The " + LONG  # a capital letter: lowercasing would be tried for a loop
    engine = Scripted(lambda s: "Ein Hund." if len(s.split()) > 64 else copy(s))
    [[hyp]] = engine.translate([run_on])
    parts = engine.sources()[1:]
    assert len(parts) == 2 and " ".join(parts) == run_on  # no lowercased retry first
    joined = " ".join(copy(p) for p in parts)
    assert (hyp.guard, hyp.text) == ("split", joined[0].upper() + joined[1:])  # a sentence's case
    err = capsys.readouterr().err
    assert re.search(
        r"\(cut short: \d pieces for 12\d source pieces\); translated again in parts", err
    )


def test_parts_cover_only_what_the_search_read_of_a_truncated_line(capsys) -> None:
    words = LONG.split() * 50  # 6,000 words: truncated to the first 100 pieces
    engine = Scripted(lambda s: "Ein Hund.", config=TranslateConfig(max_input_tokens=100))
    engine.translate([" ".join(words)])
    parts = engine.sources()[1:]
    assert " ".join(parts).split() == words[:100]  # one piece a word: 100 words, no more
    assert len(parts) == 2  # chunks of at most 64 pieces


def test_a_long_all_caps_line_is_recased_then_split() -> None:
    engine = Scripted(lambda s: GARBAGE if len(s.split()) > 64 or s != s.lower() else copy(s))
    [[hyp]] = engine.translate([LONG.upper()])
    assert engine.sources()[0] == LONG  # lowercased from the start, then in parts
    assert hyp.guard == "recased,split" and hyp.text == hyp.text.upper()
    assert hyp.text.replace("DE: ", "") == LONG.upper()


def test_the_last_resort_squeezes_runs_the_source_lacks(capsys) -> None:
    engine = Scripted(lambda s: "Ein GGGGGGGGGGGGGG und ...")
    found = engine.translate(["a dog", "A DOG", "Hmmmmm", LONG])
    assert [h[0].text for h in found] == [
        "Ein GGG und ...",
        "EIN GGG UND ...",
        "Ein GGG und ...",
        "Ein GGG und ...",
    ]
    assert [h[0].guard for h in found] == ["squeezed", "recased,squeezed", "squeezed", "squeezed"]
    # the lines (A DOG lowercased), Hmmmmm lowercased, the long one in two; repeats banned: in
    # two again, then all
    assert len(engine.seen) == 4 + 1 + 2 + 2 + 4
    err = capsys.readouterr().err
    assert err.count("no retry helped: runs of one character the source lacks cut short") == 4


@pytest.mark.parametrize("seed", range(20))
def test_no_output_holds_a_run_its_source_lacks(seed: int) -> None:
    """Whatever the model writes, the guard's output has no run of 10 or more of a character
    that its source has fewer of."""
    import random

    rng = random.Random(seed)

    def wild(source: str) -> str:
        return "".join(rng.choice("aGb ") * rng.randint(1, 25) for _ in range(6))

    lines = ["a dog runs", "A DOG RUNS", "Zzzzzzzzzzzzz!", LONG]
    for line, hyps in zip(lines, Scripted(wild).translate(lines), strict=True):
        allowed = char_runs(line)
        runs = [
            (m.group(0)[0].casefold(), len(m.group(0)))
            for m in re.finditer(r"(?i)(.)\1*", hyps[0].text)
        ]
        assert all(n < CHAR_RUN or n <= allowed.get(c, 0) for c, n in runs), hyps[0].text


def test_every_hypothesis_of_an_nbest_line_is_the_retrys() -> None:
    engine = Scripted(caps_garbage)
    [hyps, clean] = engine.translate(["A dog", "a cat"], SearchConfig(beam=3, nbest=3))
    assert [h.text for h in hyps] == ["De: a dog", "De: a dog 1", "De: a dog 2"]
    assert [h.guard for h in hyps] == ["lowercased"] * 3
    assert [h.guard for h in clean] == [None] * 3


def test_without_the_guard_a_degenerate_line_stays(capsys) -> None:
    engine = Scripted(caps_garbage)
    [[hyp]] = engine.translate(["A DOG"], SearchConfig(guard=False))
    assert hyp.text == GARBAGE
    assert hyp.guard is None and capsys.readouterr().err == ""


def test_line_numbers_name_the_lines(capsys) -> None:
    Scripted(caps_garbage).translate(["a dog", "A dog", "", "A cat"], first_number=[4, 9, 10, 12])
    err = capsys.readouterr().err
    assert re.findall(r"line (\d+):", err) == ["9", "12"]


def test_a_constrained_line_keeps_its_constraints_and_is_not_split() -> None:
    engine = Scripted(lambda s: GARBAGE if len(s.split()) > 64 or s != s.lower() else copy(s))
    search = SearchConfig(constraints="unordered", max_len_a=3.0)
    found = engine.translate(["A DOG", LONG], search, constraints=[["Hund"], ["Straße"]])
    assert [h[0].guard for h in found] == ["lowercased", "squeezed"]
    hund = engine.tgt_tokenizer.encode(["Hund"])[0]
    assert ("a dog", [hund]) in engine.seen
    # the long line: no parts, since its constraints are the line's; again with repeats banned,
    # its constraints kept
    strasse = engine.tgt_tokenizer.encode(["Straße"])[0]
    assert len(engine.seen) == 4
    assert [s for s in engine.seen if s[0] == LONG] == [(LONG, [strasse])] * 2


def test_joined_parts_keep_alignment_and_confidence() -> None:
    a = Translation(
        "Ein Hund",
        -1.0,
        -2.0,
        3,
        ((0, 0), (1, 1)),
        Confidence((-1.0, -0.5, -0.5), ((-1.0,), (-0.5,)), -2.0),
    )
    b = Translation(" läuft ", -0.5, -1.0, 1, ((1, 0),), Confidence((-0.6, -0.4), ((-0.6,),), -1.0))
    joined = joined_translation([a, b], [3, 2])
    assert joined.text == "Ein Hund läuft"
    assert joined.alignment == ((0, 0), (1, 1), (4, 2))  # b's source words come after a's 3
    assert joined.confidence == Confidence(
        (-1.0, -0.5, -0.5, -0.6, -0.4), ((-1.0,), (-0.5,), (-0.6,)), -3.0
    )
    assert joined_translation([a, Translation("x", 0.0, 0.0)], [2, 1]).alignment is None


class Looping(Scripted):
    """A model that loops on its own unless the search bans repeated n-grams."""

    def decode_batch(self, rows, search, phrases=None):
        found = super().decode_batch(rows, search, phrases)
        if search.no_repeat_ngram:
            return found
        return [[replace(h, text="ein Hund " + "rennt " * 9) for h in hyps] for hyps in found]


def test_a_loop_no_retry_ends_is_translated_with_repeats_banned(capsys) -> None:
    engine = Looping(copy)
    found = engine.translate(["a dog runs", "A DOG RUNS", LONG])
    assert [h[0].guard for h in found] == ["norepeat", "recased,norepeat", "split,norepeat"]
    assert [h[0].text for h in found[:2]] == ["de: a dog runs", "DE: A DOG RUNS"]
    chunks = [s for s in engine.sources() if s in LONG and s != LONG][-2:]  # the banned parts
    assert " ".join(chunks) == LONG and found[2][0].text == " ".join(map(copy, chunks))
    err = capsys.readouterr().err
    assert "line 1: a degenerate translation (a run of 9 words 'rennt')" in err
    assert err.count("translated again, repeated 3-grams banned") == 2
    assert "line 3: " in err and "translated again in parts, repeated 3-grams banned" in err
    loops = Scripted(lambda s: "ein Hund" + " rennt" * 9)
    [[hyp]] = loops.translate(["a dog runs"], SearchConfig(no_repeat_ngram=4))
    assert hyp.guard == "squeezed" and len(loops.seen) == 1  # repeats banned already: no retry


class Stepping(Looping):
    """:class:`Looping` (or, not ``loops``, :class:`Scripted`) as an engine that steps several
    callers' searches together (a server's scheduler): the first two retries (searches of
    lowercase lines only) wait at ``meet`` for each other, which searches run one after the
    other never do."""

    scheduler = True

    def __init__(self, script, meet: threading.Barrier, loops: bool = True) -> None:
        super().__init__(script)
        self.meet, self.waits, self.loops = meet, 2, loops

    def decode_batch(self, rows, search, phrases=None):
        if all(text.islower() for text in self.src_tokenizer.decode(rows)) and self.waits:
            self.waits -= 1
            self.meet.wait(timeout=10)
        if not self.loops:
            return Scripted.decode_batch(self, rows, search, phrases)
        return super().decode_batch(rows, search, phrases)


def test_a_scheduled_engine_searches_step_three_beside_step_one(capsys) -> None:
    lines = ["A dog runs.", "a dog runs", "A cat sits.", LONG.capitalize()]
    alone = Looping(copy)
    expected, warned = alone.translate(lines), capsys.readouterr().err
    engine = Stepping(copy, threading.Barrier(2))  # a broken barrier: searched in turn
    assert engine.translate(lines) == expected
    assert capsys.readouterr().err == warned
    assert [h[0].guard for h in expected] == ["norepeat", "norepeat", "norepeat", "split,norepeat"]
    # step 1 and step 3 of the cased short lines: one search each, in either order
    retries = [s for s in engine.sources() if s in ("a dog runs.", "a cat sits.")]
    assert len(retries) == 4
    # where step 1 mends a line, step 3's translation (searched anyway) is not used
    mended = Stepping(caps_garbage, threading.Barrier(2), loops=False)
    [[hyp]] = mended.translate(["A man rides a bike."])
    assert (hyp.text, hyp.guard) == ("De: a man rides a bike.", "lowercased")
    assert mended.sources().count("a man rides a bike.") == 2


class CalledOff(Stepping):
    """:class:`Stepping` (its retries not waiting for each other) whose step 3 (repeats
    banned) runs until its caller calls it off, as the scheduler drops a cancelled
    submission's rows (or for 10 s)."""

    def __init__(self, script, meet: threading.Barrier, loops: bool = True) -> None:
        super().__init__(script, meet, loops)
        self.called_off: list[bool] = []

    def decode_batch(self, rows, search, phrases=None):
        if search.no_repeat_ngram and (cancelled := CANCELLED.get()) is not None:
            deadline = time.monotonic() + 10
            while not cancelled() and time.monotonic() < deadline:
                time.sleep(0.005)
            self.called_off.append(cancelled())
            if cancelled():
                raise Cancelled("dropped")
        return super().decode_batch(rows, search, phrases)


def test_step_three_beside_step_one_is_called_off_once_step_one_mends_the_line() -> None:
    mended = CalledOff(caps_garbage, threading.Barrier(1), loops=False)
    start = time.monotonic()
    [[hyp]] = mended.translate(["A man rides a bike."])
    assert (hyp.text, hyp.guard) == ("De: a man rides a bike.", "lowercased")
    assert mended.called_off == [True] and time.monotonic() - start < 5
    # where step 1 does not mend it, step 3 runs to its end and serves
    looping = CalledOff(copy, threading.Barrier(1))
    assert looping.translate(["A dog runs."]) == Looping(copy).translate(["A dog runs."])
    assert looping.called_off == [False]
    # the request itself gone: step 3 is called off and the request raises
    gone = CalledOff(copy, threading.Barrier(1))
    token = CANCELLED.set(lambda: len(gone.seen) > 1)
    try:
        with pytest.raises(Cancelled):
            gone.translate(["A dog runs."])
    finally:
        CANCELLED.reset(token)
