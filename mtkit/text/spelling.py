"""Typos corrected to the words the model was trained on: :func:`corrected`.

A typo turns a word the model knows into pieces it has rarely seen together, and a
sentence-level model translates them as noise (the demo model: 32.5 BLEU on test_2016_flickr,
24.7 with a typo in 15 % of the longer words). A word the training sources never had that is
one edit away (a letter dropped, added or doubled, replaced, or two swapped: Norvig's "How to
Write a Spelling Corrector") from words they had is taken for a typo of the most frequent of
those (:class:`~mtkit.data.source_words.SourceWords`, recorded in the checkpoint). Its case is
kept: lowercase, Capitalized or ALL CAPS. Two words that differ by one letter at the end (other
than a doubled one) are taken for two forms of a word ("dog", "dogs"), not for a typo.

Only words of at least :data:`MIN_LETTERS` letters are read, and a capitalized word only where
it opens its unit or the unit has no lowercase letter (a capitalized word inside a sentence is
taken for a name). Spans masked by the text layer (URLs, e-mails, code, ...) are not words
here, and the words of ``keep`` (lowercased: a glossary's source terms) are never changed.
A word the training data never had, one edit from one it had, is changed too:
``--no-spelling`` reads words as written.
"""

from __future__ import annotations

from collections.abc import Collection

from mtkit.data.source_words import WORD, SourceWords

MIN_LETTERS = 3


def corrected(unit: str, words: SourceWords, keep: Collection[str] = ()) -> str:
    """``unit`` with each typo replaced by the word it most likely stands for.

    >>> known = SourceWords(("a", "man", "rides", "horse", "bike"))
    >>> corrected("A mna rieds a hrose Bkie", known)
    'A man rides a horse Bkie'
    >>> corrected("Mna RIEDS", known), corrected("A MNA RIEDS", known)
    ('Man RIEDS', 'A MAN RIDES')
    """
    if not words:
        return unit
    shouting = not any(char.islower() for char in unit)

    def fixed(match) -> str:
        word = match.group()
        if len(word) < MIN_LETTERS or word.lower() in keep:
            return word
        if not word.islower() and not (shouting or (match.start() == 0 and word.istitle())):
            return word
        found = _correction(word.lower(), words)
        if found is None:
            return word
        if word.isupper():
            return found.upper()
        return found.capitalize() if word[0].isupper() else found

    return WORD.sub(fixed, unit)


def _correction(word: str, words: SourceWords) -> str | None:
    """The most frequent known word one edit from ``word``; None for a known word or none."""
    rank = words.rank
    if word in rank:
        return None
    found = [c for c in _edits(word, words.letters) if c in rank and not _inflected(word, c)]
    return min(found, key=rank.__getitem__) if found else None


def _inflected(word: str, known: str) -> bool:
    """Whether ``word`` and ``known`` differ by a letter at the end, other than one doubled:
    an inflection ("dogs", "dog"), not a typo.

    >>> _inflected("dogs", "dog"), _inflected("dog", "dogs"), _inflected("dogg", "dog")
    (True, True, False)
    """
    longer, shorter = (word, known) if len(word) > len(known) else (known, word)
    return (
        len(longer) == len(shorter) + 1
        and longer.startswith(shorter)
        and longer[-1] != shorter[-1:]
    )


def _edits(word: str, letters: str) -> set[str]:
    """Every string one edit from ``word``: a letter dropped, two neighbours swapped, a letter
    replaced or added (from ``letters``)."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    dropped = [a + b[1:] for a, b in splits if b]
    swapped = [a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1]
    replaced = [a + c + b[1:] for a, b in splits if b for c in letters]
    added = [a + c + b for a, b in splits for c in letters]
    return set(dropped + swapped + replaced + added)
