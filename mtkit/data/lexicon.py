"""Which target pieces a source piece translates to, learned from a dataset's training pairs,
ranked, and kept as a :class:`~mtkit.data.shortlist.Shortlist`.

Two statistics, both over piece ids as `mtkit prepare` stored them:

- ``ibm1``: the lexical translation table p(t | s) of IBM model 1 (Brown et al., 1993, with a
  NULL source word), from ``iterations`` EM steps started uniform. Each target piece spreads
  its one count over the source pieces of its sentence in proportion to p(t | s); a piece that
  merely co-occurs with everything (a frequent word, punctuation) ends up explaining little.
  This is the table Marian's shortlists are cut from (fast_align's lex.s2t).
- ``dice``: Dice's coefficient 2 c(s, t) / (c(s) + c(t)) of the sentences holding s, t and
  both: one pass, no EM.

Everything is array arithmetic on the (source position, target position) pairs of each sentence
(a few million for Multi30k's 29k pairs), so a build takes seconds.
"""

from __future__ import annotations

import numpy as np

from mtkit.data.binarized import ParallelData
from mtkit.data.shortlist import Shortlist
from mtkit.data.tokenizer import Tokenizer
from mtkit.errors import MtkitError

METHODS = ("ibm1", "dice")


def sentence_pairs(
    src: np.ndarray, src_offsets: np.ndarray, tgt: np.ndarray, tgt_offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (source token, target token) pair within a sentence pair: the source and target
    ids of each, and the global target position it belongs to (its group in IBM 1's E-step)."""
    m, n = np.diff(src_offsets), np.diff(tgt_offsets)
    sent_of_t = np.repeat(np.arange(len(n)), n)  # sentence of each target position
    reps = m[sent_of_t]  # source tokens each target position pairs with
    group = np.repeat(np.arange(len(sent_of_t)), reps)
    first = np.cumsum(reps) - reps  # where each target position's run starts
    within = np.arange(int(reps.sum())) - np.repeat(first, reps)
    src_pos = np.repeat(src_offsets[:-1][sent_of_t], reps) + within
    return src[src_pos], tgt[group], group


def ibm1_scores(
    src: np.ndarray,
    src_offsets: np.ndarray,
    tgt: np.ndarray,
    tgt_offsets: np.ndarray,
    src_vocab: int,
    tgt_vocab: int,
    iterations: int = 5,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IBM model 1's p(t | s) after ``iterations`` EM steps: (source ids, target ids, p) of
    every pair seen (the NULL word, id ``src_vocab``, left out)."""
    s, t, group = sentence_pairs(src, src_offsets, tgt, tgt_offsets)
    null = src_vocab
    positions = len(tgt)
    s = np.concatenate([s, np.full(positions, null)])
    t = np.concatenate([t, tgt])
    group = np.concatenate([group, np.arange(positions)])
    keys, inverse = np.unique(s * tgt_vocab + t, return_inverse=True)
    key_src = keys // tgt_vocab
    prob = np.ones(len(keys))
    for _ in range(iterations):
        weight = prob[inverse]
        posterior = weight / np.bincount(group, weights=weight, minlength=positions)[group]
        counts = np.bincount(inverse, weights=posterior, minlength=len(keys))
        prob = counts / np.bincount(key_src, weights=counts, minlength=src_vocab + 1)[key_src]
    real = key_src != null
    return key_src[real], keys[real] % tgt_vocab, prob[real]


def dice_scores(
    src: np.ndarray,
    src_offsets: np.ndarray,
    tgt: np.ndarray,
    tgt_offsets: np.ndarray,
    src_vocab: int,
    tgt_vocab: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dice's coefficient of sentence co-occurrence: (source ids, target ids, dice)."""
    s, t, group = sentence_pairs(src, src_offsets, tgt, tgt_offsets)
    sent = np.repeat(np.arange(len(tgt_offsets) - 1), np.diff(tgt_offsets))[group]
    pair = np.unique((sent * src_vocab + s) * tgt_vocab + t) % (src_vocab * tgt_vocab)
    keys, both = np.unique(pair, return_counts=True)
    key_src, key_tgt = keys // tgt_vocab, keys % tgt_vocab
    return (
        key_src,
        key_tgt,
        2.0
        * both
        / (
            _sentences_with(src, src_offsets, src_vocab)[key_src]
            + _sentences_with(tgt, tgt_offsets, tgt_vocab)[key_tgt]
        ),
    )


def _sentences_with(ids: np.ndarray, offsets: np.ndarray, vocab: int) -> np.ndarray:
    """How many sentences hold each id (vocab,)."""
    sent = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    return np.bincount(np.unique(sent * vocab + ids) % vocab, minlength=vocab)


def ranked(
    src_ids: np.ndarray, tgt_ids: np.ndarray, scores: np.ndarray, src_vocab: int, top_k: int
) -> list[tuple[int, ...]]:
    """Per source id, the ``top_k`` target ids of highest score, best first (ties: lower id)."""
    order = np.lexsort((tgt_ids, -scores, src_ids))
    s, t = src_ids[order], tgt_ids[order]
    starts = np.searchsorted(s, np.arange(src_vocab + 1))
    rank = np.arange(len(s)) - starts[s]
    keep = rank < top_k
    s, t = s[keep], t[keep]
    bounds = np.searchsorted(s, np.arange(src_vocab + 1)).tolist()
    flat = t.tolist()
    return [tuple(flat[bounds[i] : bounds[i + 1]]) for i in range(src_vocab)]


def most_frequent(ids: np.ndarray, vocab: int, count: int) -> tuple[int, ...]:
    """The ``count`` most frequent ids (ties: lower id first) among those that occur."""
    counts = np.bincount(ids, minlength=vocab)
    order = np.lexsort((np.arange(vocab), -counts))
    return tuple(int(i) for i in order[:count] if counts[i] > 0)


def learn_shortlist(
    data: ParallelData,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    top_k: int = 100,
    frequent: int = 200,
    method: str = "ibm1",
    iterations: int = 5,
) -> Shortlist:
    """The shortlist of ``data`` (a training split): each source piece's ``top_k`` likeliest
    target pieces by ``method`` and the ``frequent`` most frequent target pieces."""
    if method not in METHODS:
        raise MtkitError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    if top_k < 1 or frequent < 0 or iterations < 1:
        raise MtkitError("--top-k and --iterations must be >= 1, --frequent >= 0")
    if not len(data):
        raise MtkitError(f"{data.data_dir}: the {data.split} split is empty: nothing to learn from")
    vs, vt = len(src_tok), len(tgt_tok)
    (src, src_offsets), (tgt, tgt_offsets) = data.flat("src"), data.flat("tgt")
    if len(src) and int(src.max()) >= vs or len(tgt) and int(tgt.max()) >= vt:
        raise MtkitError(f"{data.data_dir}: token ids beyond its sentencepiece vocabularies")
    if method == "ibm1":
        table = ibm1_scores(src, src_offsets, tgt, tgt_offsets, vs, vt, iterations)
    else:
        table = dice_scores(src, src_offsets, tgt, tgt_offsets, vs, vt)
    return Shortlist(
        tuple(ranked(*table, vs, top_k)),
        most_frequent(tgt, vt, frequent),
        src_tok.sha256,
        tgt_tok.sha256,
        vs,
        vt,
        method,
        top_k,
    )
