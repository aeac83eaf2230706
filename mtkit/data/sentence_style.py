"""How the training sources' sentences start and end: :class:`SentenceStyle`.

Recorded in a checkpoint from its training data (:func:`style_of`, over the sentences
:meth:`~mtkit.data.binarized.ParallelData.decoded_sources` reads) so that the text layer can
read input that leaves out what the data always had (:mod:`mtkit.text.sentence_ends`):

- ``openers``: the capitalized words that open training sentences (at least
  :data:`MIN_OPENS` of them) and are capitalized inside one at most :data:`INSIDE` as often
  ("A", "Two", "The" in English captions; not "New", which "New York" capitalizes everywhere).
  Such a word after a word that ends in a lowercase letter starts a new sentence whose writer
  left out the full stop before it.
- ``final``: the mark that at least :data:`FINAL_SHARE` of the training sentences end with
  (``.``), or "" where none is that common. A sentence written without final punctuation is
  translated with it.
- ``length``: the :data:`LENGTH_SHARE` percentile of the training sources' lengths in pieces
  (0: not recorded). A sentence longer than the model was trained on is cut into parts of
  about this length: a run-on without capitals or full stops, cut at the longest training
  length instead, gives parts of two or three sentences' worth, of which the model translates
  little more than the first.
- ``edges``: which words end and which start the sentences
  (:class:`~mtkit.data.sentence_edges.SentenceEdges`): such a sentence is cut where a sentence
  most likely ends.

Read from at most :data:`SAMPLE` sentences spread evenly over the data (a million: about 25 s
at the start of training), which bounds the cost on a large corpus.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from mtkit.data.sentence_edges import SentenceEdges, edges_of
from mtkit.data.source_words import SourceWords, words_of
from mtkit.data.tags import split_tag
from mtkit.errors import MtkitError

if TYPE_CHECKING:
    from mtkit.data.binarized import ParallelData
    from mtkit.data.tokenizer import Tokenizer

MIN_OPENS = 5  # sentences a word must open to count as an opener
INSIDE = 0.02  # capitalized inside sentences at most this share of the sentences it opens
FINAL_SHARE = 0.8  # of the sentences, ending with the mark that makes it the final one
MAX_OPENERS = 1000  # the most frequent openers kept
SAMPLE = 1_000_000  # sentences read at most
LENGTH_SHARE = 95  # the percentile of the sources' lengths recorded as ``length``


@dataclass(frozen=True)
class SentenceStyle:
    """The training sources' opening words and final mark (the module's docstring); empty: not
    recorded, and the text layer reads input as it is."""

    openers: tuple[str, ...] = ()
    final: str = ""
    length: int = 0  # pieces; 0: not recorded
    edges: SentenceEdges = SentenceEdges()

    def __bool__(self) -> bool:
        return bool(self.openers or self.final or self.length or self.edges)

    def to_dict(self) -> dict[str, Any]:
        return {
            "openers": list(self.openers),
            "final": self.final,
            "length": self.length,
            "edges": self.edges.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "sentence_style") -> SentenceStyle:
        """The style of a checkpoint's dict; a one-line error naming ``where`` otherwise."""
        if not isinstance(data, dict):
            raise MtkitError(f"{where}: must be a mapping, got {type(data).__name__}")
        openers, final = data.get("openers", []), data.get("final", "")
        if not isinstance(openers, list) or not all(isinstance(w, str) and w for w in openers):
            raise MtkitError(f"{where}: openers must be a list of words")
        if not isinstance(final, str) or len(final) > 1 or final.isalnum():
            raise MtkitError(f"{where}: final must be one punctuation mark or empty, got {final!r}")
        length = data.get("length", 0)  # (not in checkpoints older than it)
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise MtkitError(f"{where}: length must be a number of pieces, got {length!r}")
        edges = SentenceEdges.from_dict(data.get("edges", {}), f"{where}: edges")  # (idem)
        return cls(tuple(openers), final, length, edges)


def style_of(sentences: Sequence[str]) -> SentenceStyle:
    """The style of some source sentences (a leading ``>>xx<<`` tag is not a word).

    >>> style = style_of(["A dog runs.", "A cat in New York.", "New shoes."] * 5)
    >>> style.openers, style.final, style.length, style.edges.starts
    (('A',), '.', 0, (('a', 1.0), ('new', 0.5)))
    """
    opens: Counter[str] = Counter()
    inside: Counter[str] = Counter()
    finals: Counter[str] = Counter()
    count = 0
    for sentence in sentences:
        words = split_tag(sentence.strip())[1].split()
        if not words:
            continue
        count += 1
        opens[words[0]] += 1
        inside.update(w for w in words[1:] if w[:1].isupper())
        finals[words[-1][-1]] += 1
    openers = [
        word
        for word, n in opens.most_common()
        if n >= MIN_OPENS and word[:1].isupper() and word.isalpha() and inside[word] <= INSIDE * n
    ][:MAX_OPENERS]
    mark, n = finals.most_common(1)[0] if finals else ("", 0)
    final = mark if count and n >= FINAL_SHARE * count and is_mark(mark) else ""
    return SentenceStyle(tuple(openers), final, edges=edges_of(sentences))


def is_mark(char: str) -> bool:
    """Whether ``char`` is punctuation (what ends a sentence that has its final mark)."""
    return unicodedata.category(char).startswith("P") if len(char) == 1 else False


def source_records(data: ParallelData, tokenizer: Tokenizer) -> tuple[SentenceStyle, SourceWords]:
    """What a checkpoint records of its training split's sources: their sentence style and
    their words, both read from one decoding of at most :data:`SAMPLE` of them."""
    texts = data.decoded_sources(tokenizer, SAMPLE)
    return replace(style_of(texts), length=typical_length(data)), words_of(texts)


def typical_length(data: ParallelData) -> int:
    """The :data:`LENGTH_SHARE` percentile of ``data``'s source lengths in pieces (0: none)."""
    if not len(data):
        return 0
    lengths = np.asarray(data.src_lengths)
    k = min(len(lengths) - 1, len(lengths) * LENGTH_SHARE // 100)
    return int(np.partition(lengths, k)[k])
