"""The constraint automata against a brute-force reading of the same outputs."""

import itertools

import pytest
from search_helpers import contains, in_order

from mtkit.decoding.constraints import BOUNDARY, Constraints


def met_prefix_tokens(seq: list[int], phrases: list[tuple[int, ...]]) -> int:
    """Brute-force progress: tokens of whole phrases met + the longest suffix of ``seq`` that
    is a proper prefix of an unmet phrase."""
    met = [p for p in phrases if contains(seq, p)]
    ends = [
        k
        for p in phrases
        if p not in met
        for k in range(1, min(len(p), len(seq) + 1))
        if tuple(seq[len(seq) - k :]) == p[:k]
    ]
    partial = max(ends, default=0)
    return sum(len(p) for p in met) + partial


PHRASE_SETS = [
    [(5,)],
    [(5, 6)],
    [(5, 5, 6)],  # a prefix that repeats: KMP's case
    [(5, 6), (6, 7)],  # overlapping phrases
    [(5, 6, 7), (6,)],  # a phrase inside another
    [(5, 6), (5, 7), (7, 7, 5)],
    [(6, 4, 7), (5, 4)],  # words inside phrases (4 and 5 begin words below)
]


@pytest.mark.parametrize("phrases", PHRASE_SETS)
def test_unordered_automaton_equals_brute_force(phrases: list[tuple[int, ...]]) -> None:
    cons = Constraints(phrases)
    assert cons.total == sum(len(p) for p in phrases)
    for n in range(7):
        for seq in itertools.product([4, 5, 6, 7], repeat=n):
            state = cons.start
            for token in seq:
                state = cons.advance(state, token)
            seq = list(seq)
            assert cons.done(state) == all(contains(seq, p) for p in phrases), seq
            assert cons.met_by(seq) == cons.done(state)
            assert cons.progress(state) == met_prefix_tokens(seq, phrases), seq


@pytest.mark.parametrize("phrases", PHRASE_SETS)
def test_ordered_automaton_equals_brute_force(phrases: list[tuple[int, ...]]) -> None:
    cons = Constraints(phrases, ordered=True)
    for n in range(7):
        for seq in itertools.product([4, 5, 6, 7], repeat=n):
            assert cons.met_by(list(seq)) == in_order(list(seq), phrases), seq


@pytest.mark.parametrize("ordered", [False, True])
@pytest.mark.parametrize("phrases", PHRASE_SETS)
def test_wanted_tokens_are_exactly_those_that_advance(phrases, ordered: bool) -> None:
    cons = Constraints(phrases, ordered=ordered)
    for n in range(4):
        for seq in itertools.product([4, 5, 6, 7], repeat=n):
            state = cons.start
            for token in seq:
                state = cons.advance(state, token)
            now = cons.progress(state)
            rising = [t for t in range(12) if cons.progress(cons.advance(state, t)) > now]
            assert cons.wanted(state) == rising


ENDS = frozenset({4, 5})  # pieces that begin a word; 6 and 7 continue one


@pytest.mark.parametrize("ordered", [False, True])
@pytest.mark.parametrize("phrases", PHRASE_SETS)
def test_with_word_boundaries_a_phrase_counts_only_where_a_word_ends(phrases, ordered) -> None:
    cons = Constraints(phrases, ordered=ordered, boundaries=ENDS)
    assert cons.pieces == sum(len(p) for p in phrases)
    for n in range(7):
        for seq in itertools.product([4, 5, 6, 7], repeat=n):
            seq = list(seq)
            want = (
                in_order(seq, phrases, ENDS)
                if ordered
                else all(contains(seq, p, ENDS) for p in phrases)
            )
            assert cons.met_by(seq) == want, seq
            if n < 4:
                state = cons.start
                for token in seq:
                    state = cons.advance(state, token)
                now = cons.progress(state)
                rising = {t for t in range(8) if cons.progress(cons.advance(state, t)) > now}
                listed = set(cons.wanted(state))
                assert listed <= rising
                # a boundary piece left out gains no more than a word ending alone would
                ended = cons.progress(cons._read(state, BOUNDARY))
                for t in rising - listed:
                    assert t in ENDS and cons.awaits_boundary(state), (seq, t)
                    assert cons.progress(cons.advance(state, t)) == ended, (seq, t)


def test_duplicates_and_empty_phrases_count_once() -> None:
    cons = Constraints([(5, 6), (), (5, 6)])
    assert cons.phrases == [(5, 6)] and cons.total == 2
    assert Constraints([]).done(Constraints([]).start)
