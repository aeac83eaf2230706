"""Typos corrected to the words the model was trained on: :func:`corrected`.

A typo turns a word the model knows into pieces it has rarely seen together, and a
sentence-level model translates them as noise (the demo model: 32.5 BLEU on test_2016_flickr,
24.7 with a typo in 15 % of the longer words). A word the training sources never had that is
one typo away (a letter left out, an extra one typed beside its neighbour or doubled, two
swapped, a neighbouring key hit: Norvig's "How to Write a Spelling Corrector" with a keyboard's
channel) from words they had is taken for a typo of the most frequent of those
(:class:`~mtkit.data.source_words.SourceWords`, recorded in the checkpoint). Its case is kept:
lowercase, Capitalized or ALL CAPS. Two words that differ by one letter at the end (other than
a doubled one) are taken for two forms of a word ("dog", "dogs"), not for a typo.

Only words of at least :data:`MIN_LETTERS` letters are read, and a capitalized word only where
it opens its unit or the unit has no lowercase letter (a capitalized word inside a sentence is
taken for a name). Spans masked by the text layer (URLs, e-mails, code, ...) are not words
here, and the words of ``keep`` (lowercased: a glossary's source terms) are never changed.
A real word the training data never had, one typo from one it had, is changed too (on
test_2016_flickr against the demo's 29,000 training captions: 31 of 1,000 clean lines, "fox"
read as "fix", at no cost in BLEU; fewer with more data): ``--no-spelling`` reads words as
written.
"""

from __future__ import annotations

from collections.abc import Collection

from mtkit.data.augment import NEIGHBOURS
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
    """What ``word`` may have been before one typo, as people make them (and as
    :func:`mtkit.data.augment.typo` makes them): a letter left out (any of ``letters`` added
    back), an extra letter typed (one doubled, or a keyboard neighbour of a letter beside it:
    dropped), two letters swapped, a key's neighbour hit (QWERTY; a letter off those keys:
    any of ``letters``).

    >>> from string import ascii_lowercase
    >>> sorted(e for e in _edits("teh", ascii_lowercase) if e in {"the", "te"})
    ['the']
    """
    found = set()
    for i in range(len(word) + 1):
        head, tail = word[:i], word[i:]
        found.update(head + c + tail for c in letters)
        if not tail:
            continue
        beside = head[-1:] + tail[1:2]
        if any(tail[0] == c or tail[0] in NEIGHBOURS.get(c, "") for c in beside):
            found.add(head + tail[1:])
        if len(tail) > 1:
            found.add(head + tail[1] + tail[0] + tail[2:])
        found.update(head + c + tail[1:] for c in _ORIGINS.get(tail[0], letters))
    return found


# the keys whose neighbour each key is: where a mistyped letter may have come from
_ORIGINS = {
    hit: "".join(key for key, near in NEIGHBOURS.items() if hit in near)
    for hit in {c for near in NEIGHBOURS.values() for c in near}
}
