"""The words of the training sources, most frequent first: :class:`SourceWords`.

Recorded in a checkpoint from its training data (:func:`words_of`, over the sentences
:meth:`~mtkit.data.binarized.ParallelData.decoded_sources` reads) so that the text layer can
tell a typo from a word the model knows (:mod:`mtkit.text.spelling`). A word is a run of
letters, lowercased; at most :data:`MAX_WORDS` are kept.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from mtkit.data.tags import split_tag
from mtkit.errors import MtkitError

WORD = re.compile(r"[^\W\d_]+")  # a run of letters
MAX_WORDS = 200_000
MAX_LETTERS = 64  # the most frequent letters a typo is taken to replace or add


@dataclass(frozen=True)
class SourceWords:
    """The training sources' words (lowercased, most frequent first); empty: not recorded."""

    words: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.words)

    @cached_property
    def rank(self) -> dict[str, int]:
        """Each word's place in :attr:`words` (0: the most frequent)."""
        return {word: i for i, word in enumerate(self.words)}

    @cached_property
    def letters(self) -> str:
        """The letters of the words, the most frequent first (at most :data:`MAX_LETTERS`)."""
        counts = Counter(char for word in self.words for char in word)
        return "".join(char for char, _ in counts.most_common(MAX_LETTERS))

    def to_list(self) -> list[str]:
        return list(self.words)

    @classmethod
    def from_list(cls, data: Any, where: str = "source_words") -> SourceWords:
        """The words of a checkpoint's list; a one-line error naming ``where`` otherwise."""
        if not isinstance(data, list) or not all(isinstance(w, str) and w for w in data):
            raise MtkitError(f"{where}: must be a list of words")
        return cls(tuple(data))


def words_of(sentences: Iterable[str]) -> SourceWords:
    """The words of some source sentences, most frequent first (a leading ``>>xx<<`` tag is
    not a word).

    >>> words_of([">>de<< The dog, the cat.", "A dog"]).words
    ('the', 'dog', 'cat', 'a')
    """
    counts = Counter(
        word.lower() for sentence in sentences for word in WORD.findall(split_tag(sentence)[1])
    )
    return SourceWords(tuple(word for word, _ in counts.most_common(MAX_WORDS)))
