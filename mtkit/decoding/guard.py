"""Degenerate translations, told from their source: the checks behind the decoding guard.

A model pushed outside what it learned (an ALL CAPS line, Title Case, a run-on of hundreds of
words) can fall into a loop: one character or one piece again and again (``Ein
„GGGGGGGGCCCCCCCCCCCC…``), or far more pieces than its source has. :func:`degeneration` says
whether a translation did, measured against its own source, so that a source holding a long
run itself (``zzzzzzzzzzzz`` copied, ``Hmmmmmmmmmmm``) never counts. A translation is
degenerate when it holds

- a run of one character (case folded) of ``CHAR_RUN`` (10) or more, longer than the
  source's longest run of that character;
- a run of one target piece longer than ``max(PIECE_FLOOR, s) + PIECE_SLACK`` pieces (3 and
  3: 7 at least; s the source's longest run of one piece), unless the run's text occurs in
  the source (a number copied, which the target vocabulary cuts into other pieces); the same
  for a run of one word (whitespace-separated, case folded) against the source's word runs,
  a loop of a word made of several pieces (``rennt rennt rennt ...``);
- more than ``LENGTH_A * p + LENGTH_B`` pieces for a source of p pieces (3 and 10);
- fewer than ``SHORT * p`` pieces (half) for a long source (p above ``SPLIT_PIECES``, 64): a
  run-on line the model cut short (the demo model rendered a 269-word line without
  punctuation in 27 words).

Clean text is far from these (Multi30k, 29,000 training pairs, each of en-de, de-en, en-fr,
fr-en, en-cs and cs-en with its own 8,000-piece joint sentencepiece model): no German
reference holds a run of one character longer than 4 or of one piece longer than 3, and the
longest reference for its source's length has ``2.08 * p + 10`` pieces (en-fr; 1.6 for de), so
``3 * p + 10`` leaves a margin (2 * p + 10 would have fired on one en-fr pair). No Multi30k
source has more than 64 pieces; of WMT21's news sources that do (221 en-de, 80 de-en, in the
demo's sentencepiece model), no reference has fewer than 0.74 times their pieces, so half
leaves a margin too. The length rule
matters where the search allows that many pieces (``--max-len-a`` above 3, CTranslate2);
under the default limit (1.2 * p + 10) a loop shows as a run.

What to do about a degenerate translation is the engines' (:mod:`mtkit.engines.guard`); the
helpers for it are here: the case of a source (:func:`case_pattern`, put back on a translation
of its lowercased text by :func:`with_case`), where to cut a long line (:func:`chunk_sizes`),
and the last resort, a translation's runs cut short (:func:`squeezed`).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence

CHAR_RUN = 10  # a run of one character this long, longer than the source's: degenerate
PIECE_FLOOR = 3  # a run of one piece longer than max(PIECE_FLOOR, source's) + PIECE_SLACK
PIECE_SLACK = 3
LENGTH_A, LENGTH_B = 3, 10  # more pieces than LENGTH_A * source pieces + LENGTH_B
SPLIT_PIECES = 64  # a degenerate line of more source pieces is translated in chunks of this
SHORT = 0.5  # a source of more than SPLIT_PIECES pieces, translated in fewer than SHORT * p
WORD_START = "\u2581"  # sentencepiece's ▁

CUT_SHORT = "cut short"  # how degeneration() begins the reason for a long line cut short
UPPER, TITLE, SENTENCE, OTHER = "upper", "title", "sentence", "other"  # case patterns
_WORDS = re.compile(r"\S+")
_LONG_RUN = re.compile(rf"(.)\1{{{CHAR_RUN - 1},}}", re.IGNORECASE | re.DOTALL)


def char_runs(text: str) -> dict[str, int]:
    """The longest run of each character of ``text``, case folded.

    >>> char_runs("Hmmm, MM!")
    {'h': 1, 'm': 3, ',': 1, ' ': 1, '!': 1}
    """
    found: dict[str, int] = {}
    for char, run in itertools.groupby(text, key=str.casefold):
        found[char] = max(found.get(char, 0), len(list(run)))
    return found


def piece_runs(pieces: Sequence[str]) -> list[tuple[str, int]]:
    """Each run of one piece in ``pieces``: (the piece, how many in a row).

    >>> piece_runs(["▁the", "▁the", "▁dog"])
    [('▁the', 2), ('▁dog', 1)]
    """
    return [(piece, len(list(run))) for piece, run in itertools.groupby(pieces)]


def piece_limit(source_pieces: Sequence[str]) -> int:
    """The longest run of one piece a translation of ``source_pieces`` may hold.

    >>> piece_limit(["▁a", "▁b"]), piece_limit(["▁z"] * 12)
    (6, 15)
    """
    longest = max((run for _, run in piece_runs(source_pieces)), default=0)
    return max(PIECE_FLOOR, longest) + PIECE_SLACK


def length_limit(source_pieces: int) -> int:
    """The most pieces a translation of a source of ``source_pieces`` pieces may have."""
    return LENGTH_A * source_pieces + LENGTH_B


def degeneration(
    source: str, source_pieces: Sequence[str], text: str, pieces: Sequence[str]
) -> str | None:
    """Why ``text`` (in target ``pieces``) is a degenerate translation of ``source`` (in
    ``source_pieces``), in words; None when it is not (the rules: the module's docstring).

    >>> degeneration("A CAT.", ["▁A", "▁CA", "T", "."], "Ein „GGGGGGGGGGGG", ["▁Ein", "▁„"])
    "a run of 12 'G'"
    >>> degeneration("the zzzzzzzzzzzz", ["▁the", "▁zz"], "die zzzzzzzzzzzz", ["▁die", "▁zz"])
    >>> degeneration("the dog", ["▁the", "▁dog"], "der der der der der der der", ["▁der"] * 7)
    "a run of 7 pieces '▁der'"
    >>> degeneration("a dog", ["▁a", "▁dog"], "ein Hund", ["▁ein", "▁H", "und"] * 6)
    '18 pieces for 2 source pieces'
    >>> degeneration("dogs run", ["▁dogs", "▁run"], "Hunde" + " rennt" * 7, ["▁Hu", "▁r", "t"])
    "a run of 7 words 'rennt'"
    >>> degeneration("a dog " * 40, ["▁a", "▁dog"] * 40, "ein Hund", ["▁ein", "▁Hund"])
    'cut short: 2 pieces for 80 source pieces'
    """
    for run in _LONG_RUN.finditer(text):  # the runs of CHAR_RUN or more, case folded
        length, char = len(run.group()), run.group()[0]
        if length > char_runs(source).get(char.casefold(), 0):
            return f"a run of {length} {char!r}"
    limit = piece_limit(source_pieces)
    for piece, run in piece_runs(pieces):
        if run > limit and not copied(piece, run, source):
            return f"a run of {run} pieces {piece!r}"
    words = piece_limit(source.casefold().split())
    for word, run in piece_runs(text.casefold().split()):
        if run > words and not copied(f"{WORD_START}{word}", run, source):
            return f"a run of {run} words {word!r}"
    if len(pieces) > length_limit(len(source_pieces)):
        return f"{len(pieces)} pieces for {len(source_pieces)} source pieces"
    if len(source_pieces) > SPLIT_PIECES and len(pieces) < SHORT * len(source_pieces):
        return f"{CUT_SHORT}: {len(pieces)} pieces for {len(source_pieces)} source pieces"
    return None


def copied(piece: str, run: int, source: str) -> bool:
    """Whether ``run`` pieces ``piece`` in a row spell text that ``source`` holds."""
    spelled = (piece * run).replace(WORD_START, " ").strip().casefold()
    return bool(spelled) and spelled in " ".join(source.split()).casefold()


def squeezed(text: str, source: str) -> str:
    """``text`` with every run of one character that makes it degenerate (``CHAR_RUN`` or
    more, longer than the source's run of that character) cut to ``max(3, the source's)``.

    >>> squeezed("Ein GGGGGGGGGGGGGG und zzzzzzzzzzzz!", "Hmmmmm, zzzzzzzzzzzz")
    'Ein GGG und zzzzzzzzzzzz!'
    >>> squeezed("Hmmmmmmmmmmmmmm", "Hmmmmm")
    'Hmmmmm'
    """
    allowed = char_runs(source)

    def cut(run: re.Match) -> str:
        keep = allowed.get(run.group()[0].casefold(), 0)
        return run.group() if len(run.group()) <= keep else run.group()[: max(3, keep)]

    return _LONG_RUN.sub(cut, text)


def _initial(word: str) -> str:
    """A word's first letter or digit ("" if it has none)."""
    return next((c for c in word if c.isalnum()), "")


def case_pattern(text: str) -> str:
    """How ``text`` is cased: ``upper`` (ALL CAPS: two cased letters or more, none lower
    case), ``title`` (Title Case: two words or more that start with a letter, every one of
    them upper case, and not ALL CAPS), ``sentence`` (the first letter upper case, the rest
    anything else) or ``other`` (no letter, or a lower case first letter). A word starts
    where its first letter or digit is (``„Hallo``: at ``H``; ``3D``: with a digit).

    >>> [case_pattern(t) for t in ["A MAN RIDES.", "A Man Rides", "A man rides.", "OK"]]
    ['upper', 'title', 'sentence', 'upper']
    >>> [case_pattern(t) for t in ["Hello", "I", "a Man", "3 Dogs Run", "42", "THE iPHONE"]]
    ['sentence', 'sentence', 'other', 'title', 'other', 'sentence']
    """
    cased = [c for c in text if c.isupper() or c.islower()]
    if len(cased) >= 2 and not any(c.islower() for c in cased):
        return UPPER
    initials = [c for c in map(_initial, text.split()) if c.isalpha()]
    if len(initials) >= 2 and all(c.isupper() for c in initials):
        return TITLE
    return SENTENCE if cased and cased[0].isupper() else OTHER


def with_case(text: str, pattern: str) -> str:
    """``text`` (a translation of a lowercased source) cased as the source was: ALL CAPS,
    each word's first letter upper case (Title Case) or the first letter's (a sentence);
    ``other``: as it is. In capitals ``ß`` is the capital ``ẞ`` (German orthography allows it
    beside ``SS`` since 2017), which keeps the spelling: ``SS`` lower-cases to ``ss``.

    >>> with_case("ein mann fährt rad.", UPPER), with_case("„ein mann“ 3d", TITLE)
    ('EIN MANN FÄHRT RAD.', '„Ein Mann“ 3d')
    >>> with_case("die weiße straße", UPPER), with_case("die weiße straße", UPPER).lower()
    ('DIE WEIẞE STRAẞE', 'die weiße straße')
    >>> with_case("„ein mann“", SENTENCE), with_case("ein Mann", OTHER)
    ('„Ein mann“', 'ein Mann')
    """
    if pattern == UPPER:
        return text.replace("ß", "ẞ").upper()
    if pattern == TITLE:
        return _WORDS.sub(lambda word: _capitalized(word.group()), text)
    if pattern == SENTENCE:
        return _capitalized(text)
    return text


def _capitalized(text: str) -> str:
    """``text`` with its first letter or digit, if a letter, in upper case."""
    for i, char in enumerate(text):
        if char.isalnum():
            return text[:i] + char.upper() + text[i + 1 :] if char.isalpha() else text
    return text


def chunk_sizes(pieces: Sequence[int], limit: int = SPLIT_PIECES) -> list[int]:
    """How many words go in each chunk of a line whose words have ``pieces`` pieces each:
    as few chunks as ``limit`` pieces a chunk allows (a longer word alone), about equal in
    size (a chunk ends once it reaches its share of the line).

    >>> chunk_sizes([3, 4, 2, 5, 1], 7), chunk_sizes([2] * 10, 8), chunk_sizes([9, 1], 4)
    ([2, 2, 1], [4, 3, 3], [1, 1])
    """
    total = sum(pieces)
    chunks = max(1, math.ceil(total / limit))
    sizes: list[int] = []
    done, size, count = 0, 0, 0  # pieces in the chunks closed; the open chunk's pieces, words
    for n in pieces:
        if count and (size + n > limit or (done + size) * chunks >= (len(sizes) + 1) * total):
            sizes.append(count)
            done, size, count = done + size, 0, 0
        size, count = size + n, count + 1
    return [*sizes, count] if count else sizes
