"""Text modifiers for training-time augmentation: the input people type, made from clean pairs.

Each modifier is a pure function of its text (and of a ``random.Random`` where it draws), so
that an epoch's augmented pairs are a function of (seed, epoch, pair) alone
(:mod:`mtkit.training.augment` applies them). What they imitate, after OpusTrainer's modifiers
(Mozilla's translation pipeline trains its models with them): text in UPPER CASE or Title Case,
lower case typed in a hurry, typos, sentences run together without their final full stops, and
lines of emoji, symbols and numbers that a translation should copy.

>>> uppercase("A dog runs."), titlecase("a dog's ball, 2 cats"), lowercase("A Dog")
('A DOG RUNS.', "A Dog's Ball, 2 Cats", 'a dog')
>>> strip_final("A dog runs.  "), strip_final("Why?!"), strip_final("3.5")
('A dog runs', 'Why', '3.5')
"""

from __future__ import annotations

import random
import re

# letters next to each other on a QWERTY keyboard (a typo hits a neighbour)
_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
NEIGHBOURS: dict[str, str] = {}
for _r, _row in enumerate(_ROWS):
    for _c, _key in enumerate(_row):
        _near = [_row[j] for j in (_c - 1, _c + 1) if 0 <= j < len(_row)]
        for _other in (_r - 1, _r + 1):
            if 0 <= _other < len(_ROWS):
                _near += [_ROWS[_other][j] for j in (_c - 1, _c) if 0 <= j < len(_ROWS[_other])]
        NEIGHBOURS[_key] = "".join(_near)
TYPO_KINDS = ("drop", "swap", "double", "neighbour")
# sentence-final punctuation that a run-on leaves out (closing quotes and brackets stay)
FINAL = re.compile(r"[.!?。！？…;][.!?。！？…;\s]*$")
_WORD = re.compile(r"\S+")
# what noise lines are made of: emoji, symbols and numbers
EMOJI = "😀😂😍🤔👍🙏🎉🔥❤✨🚀🌍🐶🍕⚽🎵📷💡✅❌"
SYMBOLS = "©®™°±§¶•→←↑↓★☆♥♦♣♠✓✗€£¥$%&#@*+=~^|<>/\\"


def uppercase(text: str) -> str:
    return text.upper()


def lowercase(text: str) -> str:
    return text.lower()


def titlecase(text: str) -> str:
    """Every whitespace-separated word that starts with a letter gets an upper-case first
    letter; nothing else changes (unlike ``str.title``, which lowercases the rest)."""
    return _WORD.sub(lambda m: m[0][0].upper() + m[0][1:] if m[0][0].isalpha() else m[0], text)


def strip_final(text: str) -> str:
    """The text without its final punctuation (and trailing whitespace)."""
    return FINAL.sub("", text).rstrip()


def typo(word: str, kind: str, rng: random.Random) -> str:
    """``word`` with one typo of ``kind`` (:data:`TYPO_KINDS`) at a random letter.

    >>> typo("house", "drop", random.Random(1)), typo("house", "double", random.Random(1))
    ('huse', 'hoouse')
    """
    letters = [i for i, ch in enumerate(word) if ch.isalpha()]
    i = rng.choice(letters)
    if kind == "drop":
        return word[:i] + word[i + 1 :]
    if kind == "double":
        return word[: i + 1] + word[i:]
    if kind == "swap":  # with the next character, or the previous one at the end
        j = i + 1 if i + 1 < len(word) else i - 1
        i, j = min(i, j), max(i, j)
        return word[:i] + word[j] + word[i] + word[j + 1 :]
    near = NEIGHBOURS.get(word[i].lower())
    if not near:  # a letter off the QWERTY keys (é, ß, ...): doubled instead
        return word[: i + 1] + word[i:]
    key = rng.choice(near)
    return word[:i] + (key.upper() if word[i].isupper() else key) + word[i + 1 :]


def typos(text: str, rng: random.Random, rate: float) -> str:
    """Typos in ``rate`` of the words of three or more letters (at least one such word gets
    one); whitespace and the other words are kept as they are."""
    words = list(_WORD.finditer(text))
    eligible = [m for m in words if sum(ch.isalpha() for ch in m[0]) >= 3]
    if not eligible:
        return text
    chosen = [m for m in eligible if rng.random() < rate] or [rng.choice(eligible)]
    out, end = [], 0
    for m in chosen:
        out += [text[end : m.start()], typo(m[0], rng.choice(TYPO_KINDS), rng)]
        end = m.end()
    return "".join(out) + text[end:]


def noise_line(rng: random.Random) -> str:
    """1-6 words of emoji, symbols or numbers (a line a translation should copy)."""
    words = []
    for _ in range(rng.randint(1, 6)):
        kind = rng.randrange(3)
        if kind == 0:
            words.append("".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 3))))
        elif kind == 1:
            words.append("".join(rng.choice(SYMBOLS) for _ in range(rng.randint(1, 3))))
        else:
            words.append(str(rng.randint(0, 10 ** rng.randint(1, 5))))
    return " ".join(words)


def merge(texts: list[str], strip: bool) -> str:
    """Sentences joined by a space into one line; ``strip``: each without its final
    punctuation (a run-on).

    >>> merge(["A dog runs.", "Two cats sit!"], strip=True)
    'A dog runs Two cats sit'
    """
    return " ".join(strip_final(t) if strip else t.strip() for t in texts)
