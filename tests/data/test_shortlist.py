"""Lexical shortlists (mtkit.data.shortlist, mtkit.data.lexicon): the batch union, the file
round trip and its refusals, and the statistics against hand computations and a plain-Python
IBM model 1."""

from __future__ import annotations

import gzip
import json
import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from mtkit.data.binarized import ParallelData, load_tokenizers
from mtkit.data.lexicon import (
    dice_scores,
    ibm1_scores,
    learn_shortlist,
    most_frequent,
    ranked,
    sentence_pairs,
)
from mtkit.data.shortlist import Shortlist, read_shortlist, read_shortlist_for
from mtkit.errors import MtkitError

SMALL = Shortlist(((), (5,), (6, 7), (), (2, 9)), (8, 3), "a" * 64, "b" * 64, 5, 10, "ibm1", 2)


def flat(pairs: list[tuple[list[int], list[int]]]) -> tuple[np.ndarray, ...]:
    """(src ids, src offsets, tgt ids, tgt offsets) of sentence pairs, as ParallelData.flat."""
    out = []
    for side in (0, 1):
        rows = [p[side] for p in pairs]
        offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
        out += [np.array([t for r in rows for t in r], dtype=np.int64), offsets]
    return tuple(out)


def table(src: np.ndarray, tgt: np.ndarray, score: np.ndarray) -> dict[tuple[int, int], float]:
    return {(int(s), int(t)): float(p) for s, t, p in zip(src, tgt, score, strict=True)}


def test_union_is_the_frequent_the_always_and_each_source_pieces_candidates() -> None:
    got = SMALL.union([[1, 4], [2, 99, -1]], always=[0, 1])  # 99, -1: no such source piece
    assert got.tolist() == [0, 1, 2, 3, 5, 6, 7, 8, 9]
    assert SMALL.union([]).tolist() == [3, 8]
    assert SMALL.union([[0, 3]], always=[3]).tolist() == [3, 8]  # no candidates, no duplicates


def test_cut_keeps_the_best_of_each_list() -> None:
    cut = SMALL.cut(top_k=1, frequent=1)
    assert cut.candidates == ((), (5,), (6,), (), (2,)) and cut.frequent == (8,)
    assert cut.top_k == 1 and cut.union([[2]]).tolist() == [6, 8]


def test_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "s.json.gz"
    with path.open("wb") as handle:
        SMALL.write(handle)
    assert read_shortlist(path) == SMALL
    assert read_shortlist(path).union([[4]]).tolist() == [2, 3, 8, 9]
    data = json.loads(gzip.decompress(path.read_bytes()))
    assert data["format"] == "mtkit-shortlist" and data["candidates"][4] == [2, 9]


def _gz(value: object) -> bytes:
    return gzip.compress(json.dumps(value).encode())


GOOD = SMALL.to_dict()


@pytest.mark.parametrize(
    "content, error",
    [
        (b"plain text", r"not a shortlist file"),
        (_gz([1, 2]), r"not an mtkit shortlist"),
        (_gz({**GOOD, "version": 2}), r"shortlist version 2, this mtkit reads 1"),
        (_gz({**GOOD, "candidates": [[], ["x"], [], [], []]}), r"candidates of source id 1 is not"),
        (_gz({**GOOD, "frequent": [10]}), r"a target id outside 0\.\.9"),
        (_gz({**GOOD, "candidates": [[]]}), r"1 candidate lists for 5 source pieces"),
        (_gz({k: v for k, v in GOOD.items() if k != "top_k"}), r"damaged shortlist \(KeyError"),
    ],
    ids=["not-gzip", "not-an-object", "version", "not-ids", "out-of-range", "count", "key"],
)
def test_a_damaged_file_is_refused_in_one_line(tmp_path: Path, content: bytes, error: str) -> None:
    path = tmp_path / "bad.gz"
    path.write_bytes(content)
    with pytest.raises(MtkitError, match=error) as caught:
        read_shortlist(path)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(MtkitError, match=r"nope\.gz: no such shortlist file"):
        read_shortlist(tmp_path / "nope.gz")


def test_another_vocabulary_is_refused(tiny_dataset: Path) -> None:
    src, tgt = load_tokenizers(tiny_dataset)
    built = learn_shortlist(ParallelData(tiny_dataset, "train"), src, tgt, top_k=3, frequent=2)
    built.check_vocabularies(src, tgt, "here")  # its own: fine
    other = Shortlist(
        built.candidates,
        built.frequent,
        built.src_sha256,
        "c" * 64,
        built.src_vocab_size,
        built.tgt_vocab_size,
        "ibm1",
        3,
    )
    with pytest.raises(MtkitError, match=r"^here: built for another target vocabulary \(sent"):
        other.check_vocabularies(src, tgt, "here")


def test_read_for_a_model_reads_its_own_and_names_the_option_for_another(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    src, tgt = load_tokenizers(tiny_dataset)
    built = learn_shortlist(ParallelData(tiny_dataset, "train"), src, tgt, top_k=3, frequent=2)
    other = Shortlist(
        built.candidates,
        built.frequent,
        built.src_sha256,
        "c" * 64,
        built.src_vocab_size,
        built.tgt_vocab_size,
        "ibm1",
        3,
    )
    paths = {}
    for name, shortlist in (("own", built), ("other", other)):
        paths[name] = tmp_path / f"{name}.json.gz"
        with paths[name].open("wb") as handle:
            shortlist.write(handle)
    assert read_shortlist_for(paths["own"], src, tgt, "--shortlist") == built
    with pytest.raises(MtkitError, match=rf"^--draft-shortlist {paths['other']}: built for anot"):
        read_shortlist_for(paths["other"], src, tgt, "--draft-shortlist")


# ---------------------------------------------------------------------------------------------
# Statistics

HAND = [([0, 1], [2, 3]), ([0], [2])]  # (a b -> x y), (a -> x): a=0, b=1, x=2, y=3


def test_sentence_pairs_are_every_source_target_pair_of_each_sentence() -> None:
    pairs = [([4, 5, 6], [7, 8]), ([], [9]), ([1], []), ([2], [3])]
    s, t, group = sentence_pairs(*flat(pairs))
    expected = [
        (a, b, g)
        for (src, tgt), first in zip(pairs, [0, 2, 3, 3], strict=True)
        for j, b in enumerate(tgt)
        for a in src
        for g in [first + j]
    ]
    assert list(zip(s.tolist(), t.tolist(), group.tolist(), strict=True)) == expected


def test_ibm1_one_iteration_by_hand() -> None:
    # uniform first E-step over {a, b, NULL} and {a, NULL}: c(a,x) = 1/3 + 1/2, c(a,y) = 1/3
    got = table(*ibm1_scores(*flat(HAND), 2, 4, iterations=1))
    assert got == pytest.approx({(0, 2): 5 / 7, (0, 3): 2 / 7, (1, 2): 1 / 2, (1, 3): 1 / 2})


def ibm1_reference(pairs: list, iterations: int) -> dict[tuple[int, int], float]:
    """IBM model 1 as textbooks write it (Koehn, Statistical MT, fig. 4.3), NULL = -1."""
    prob: dict[tuple[int, int], float] = defaultdict(lambda: 1.0)
    for _ in range(iterations):
        count: dict[tuple[int, int], float] = defaultdict(float)
        total: dict[int, float] = defaultdict(float)
        for src, tgt in pairs:
            for t in tgt:
                z = sum(prob[(s, t)] for s in [*src, -1])
                for s in [*src, -1]:
                    count[(s, t)] += prob[(s, t)] / z
                    total[s] += prob[(s, t)] / z
        prob = defaultdict(float, {k: c / total[k[0]] for k, c in count.items()})
    return {k: p for k, p in prob.items() if k[0] != -1}


def test_ibm1_equals_the_textbook_algorithm() -> None:
    rng = random.Random(3)
    pairs = [
        (
            [rng.randrange(12) for _ in range(rng.randint(1, 6))],
            [rng.randrange(9) for _ in range(rng.randint(1, 6))],
        )
        for _ in range(40)
    ]
    got = table(*ibm1_scores(*flat(pairs), 12, 9, iterations=4))
    assert got == pytest.approx(ibm1_reference(pairs, 4), rel=1e-12)


def test_dice_by_hand() -> None:
    got = table(*dice_scores(*flat(HAND + [([1, 1], [3, 3])]), 2, 4))
    # c(a)=2 c(b)=2 c(x)=2 c(y)=2; c(a,x)=2 c(a,y)=1 c(b,x)=1 c(b,y)=2 (sentences, not tokens)
    assert got == pytest.approx({(0, 2): 1.0, (0, 3): 0.5, (1, 2): 0.5, (1, 3): 1.0})


def test_ranked_keeps_the_top_k_best_first_ties_by_id() -> None:
    src = np.array([2, 0, 0, 0, 2, 0])
    tgt = np.array([1, 5, 3, 4, 0, 6])
    score = np.array([0.5, 0.1, 0.9, 0.9, 0.5, 0.2])
    assert ranked(src, tgt, score, 3, top_k=2) == [(3, 4), (), (0, 1)]


def test_most_frequent_leaves_out_what_never_occurs() -> None:
    assert most_frequent(np.array([4, 1, 4, 2, 1, 4]), 6, 5) == (4, 1, 2)


def test_learned_shortlist_lists_a_word_translation_first(make_tiny_dataset) -> None:
    # two-word sentences over a 4-word dictionary, each word one piece
    words = {"sun": "sonne", "moon": "mond", "star": "stern", "sky": "himmel"}
    rng = random.Random(0)
    train = [
        (f"{a} {b}", f"{words[a]} {words[b]}")
        for a, b in (rng.sample(list(words), 2) for _ in range(60))
    ]
    data = make_tiny_dataset("d", train, train[:2], vocab_size=60)
    src, tgt = load_tokenizers(data)
    for method in ("ibm1", "dice"):
        built = learn_shortlist(ParallelData(data, "train"), src, tgt, 1, 0, method)
        for word, translation in words.items():
            [piece] = src.encode([word])[0]
            assert built.candidates[piece] == tuple(tgt.encode([translation])[0]), method
