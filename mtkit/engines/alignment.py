"""Word alignments from a model's cross-attention, the way Bergamot and OPUS-MT read them.

An engine that is asked for alignments (``SearchConfig.alignment``) gives, for each hypothesis,
the attention distribution of one decoder layer (averaged over its heads) at each step: row t
is the step that produced target piece t, column s source piece s. :func:`word_alignment` turns
it into word pairs: each target piece is aligned to the source piece it attends to most (the
source EOS and a multilingual model's leading ``>>xx<<`` tag are never chosen), and the pieces
are mapped to whitespace words, so that the pairs are Moses / fast_align ``i-j`` pairs over
``source.split()`` and ``translation.split()``.

Pieces to words: a sentencepiece piece starting with ``▁`` starts a word (sentencepiece never
lets a piece span whitespace), so the k-th word is the run of pieces from its k-th ``▁``. A
leading tag is not a word of the source. Where normalisation makes the counts differ from the
text's whitespace words (a word made only of characters the normaliser removes), indices are
kept within the text's words.

Which layer: :func:`mtkit.config.alignment_layer` resolves ``--alignment-layer`` (negative:
from the top). The default is the last layer, as Marian's (``--transformer-guided-alignment-layer
last``) and CTranslate2's: on the demo model (3 decoder layers) its pairs agree best with
eflomal's (AER 0.345 against 0.376 for the penultimate layer and 0.412 for the first;
``benchmarks/bench_alignment.py``). Row t is the step that *predicts* target piece t: the
step that reads it as input agrees with eflomal 10x less (AER 0.94).
"""

from __future__ import annotations

from collections.abc import Sequence

Alignment = tuple[tuple[int, int], ...]  # (source word i, target word j), 0-based, sorted
WORD_START = "\u2581"  # sentencepiece's ▁


def word_indices(pieces: Sequence[str]) -> list[int]:
    """The word each piece belongs to (a piece starting with ``▁`` starts a new word; the
    first piece starts word 0 either way)."""
    words, index = [], -1
    for i, piece in enumerate(pieces):
        if i == 0 or piece.startswith(WORD_START):
            index += 1
        words.append(index)
    return words


def word_alignment(
    src_pieces: Sequence[str],
    tgt_pieces: Sequence[str],
    attention: Sequence[Sequence[float]],
    tagged: bool = False,
    src_words: int | None = None,
    tgt_words: int | None = None,
) -> Alignment:
    """Moses pairs (source word, target word) from ``attention`` (at least one row per target
    piece, at least one column per source piece; rows and columns beyond them — the EOS step,
    the source EOS — are ignored). ``tagged``: source piece 0 is a target-language tag, not a
    word. ``src_words``/``tgt_words``: the texts' whitespace word counts, indices kept below
    them."""
    first = 1 if tagged else 0
    source = list(src_pieces[first:])
    if not source or not tgt_pieces:
        return ()
    src_of = word_indices(source)
    tgt_of = word_indices(tgt_pieces)
    src_cap = (src_words if src_words is not None else src_of[-1] + 1) - 1
    tgt_cap = (tgt_words if tgt_words is not None else tgt_of[-1] + 1) - 1
    if src_cap < 0 or tgt_cap < 0:
        return ()
    pairs = set()
    for t in range(len(tgt_pieces)):
        row = attention[t]
        s = max(range(len(source)), key=lambda j: row[first + j])
        pairs.add((min(src_of[s], src_cap), min(tgt_of[t], tgt_cap)))
    return tuple(sorted(pairs))


def moses(alignment: Alignment) -> str:
    """``0-0 1-2 ...``: the pairs as fast_align and Moses write them."""
    return " ".join(f"{i}-{j}" for i, j in alignment)
