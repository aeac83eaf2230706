"""Sentence ends the writer left out, put back as the model's training data had them.

A model learns from sentences that nearly all end with a full stop and start with a capital;
what people type often has neither: a headline, a hurried message, sentences run on into one
line ("A man sleeps A dog barks"). Read with the training sources' style
(:class:`~mtkit.data.sentence_style.SentenceStyle`, recorded in the checkpoint):

- :func:`run_on_cuts`: where a line runs a new sentence on without a mark: a word ending in a
  lowercase letter, whitespace, then one of the style's *openers* (a capitalized word that
  opens training sentences and is almost never capitalized inside one); or where the style's
  *edges* (:mod:`mtkit.data.sentence_edges`) say a sentence ends between two words, in a line
  typed without capitals (or before a capitalized word). With ``--split-sentences`` the
  segmenter cuts there too (:func:`mtkit.text.segment.segment`), and a sentence too long for
  the model is cut there first (:func:`mtkit.text.segment.cut_long`). In ALL CAPS and Title
  Case no capital opens a sentence.
- :func:`closed`: a sentence that ends with a letter or digit is translated with the style's
  *final* mark after it. The translation is the model's (it ends as the model ends it).

Measured on the demo configuration with augmentation (recipes/multi30k/README.md, seed 1):
test_2016_flickr captions without their full stop 34.4 BLEU, with it put back 35.9 (as written:
35.9); four captions run on to a line, with ``--split-sentences``, 23.0 before, 35.5 cut at
openers and closed (35.9 one by one). The edges, on the make demo model: two captions to a line
lowercased without marks, ``--split-sentences``, 29.2 -> 33.4 (docs/translate.md).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from mtkit.data.sentence_edges import SentenceEdges
from mtkit.decoding.guard import TITLE, UPPER, case_pattern

RUN_ON = 0.1  # an edge score above this between two words: one sentence runs on into the next

# a word that ends in a letter, the whitespace after it, the next word
_AFTER_LOWER = re.compile(r"(?<=[^\W\d_])\s+(?=(\S+))")


def run_on_cuts(
    sentence: str, openers: Collection[str], edges: SentenceEdges = SentenceEdges()
) -> list[tuple[int, int]]:
    """The whitespace ``(start, end)`` before each sentence that ``sentence`` runs on into:
    after a word that ends in a lowercase letter, before a word of ``openers`` (as written, or
    with punctuation after it); or after a word that ends in a letter, where the training
    sentences' ``edges`` score above :data:`RUN_ON` (before a capitalized word only, where the
    sentence's first letter is a capital). In an ALL CAPS or Title Case sentence no capital
    opens a sentence.

    >>> run_on_cuts("A man sleeps A dog barks in New York", {"A"})
    [(12, 13)]
    >>> edges = SentenceEdges((("grass", 0.6),), (("a", 0.3),))
    >>> run_on_cuts("a dog runs on grass a man", (), edges)
    [(19, 20)]
    """
    if openers and case_pattern(sentence) in (UPPER, TITLE):  # capitals that say nothing
        openers = ()
    if not openers and not edges:
        return []
    cuts = []
    # a writer who capitalizes a sentence's first word would the next one's
    cased = next((char for char in sentence if char.isalpha()), "").isupper()
    for m in _AFTER_LOWER.finditer(sentence):
        word = m.group(1)
        if sentence[m.start() - 1].islower() and (
            word in openers or word.rstrip(".,;:!?") in openers
        ):
            cuts.append((m.start(), m.end()))
        elif (
            edges
            and (not cased or word[:1].isupper())
            and edges.score(sentence[max(0, m.start() - 64) : m.start()], word) > RUN_ON
        ):
            cuts.append((m.start(), m.end()))
    return cuts


def closed(unit: str, final: str) -> str:
    """``unit`` with ``final`` after it where it ends with a letter or digit.

    >>> closed("A dog runs", "."), closed("A dog runs!", "."), closed("A dog", "")
    ('A dog runs.', 'A dog runs!', 'A dog')
    """
    return unit + final if final and unit[-1:].isalnum() else unit
