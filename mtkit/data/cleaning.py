"""Corpus cleaning: whitespace normalisation and the pair filters of `mtkit prepare`.

Filters run in this order and each dropped pair is counted under the first one it fails:

``empty``       either side is empty after stripping
``dedup``       the exact (source, target) pair was seen before (8-byte digests, bounded memory)
``max_tokens``  either side has more than ``max_tokens`` sentencepiece pieces
``max_ratio``   the longer side has more than ``max_ratio`` times the pieces of the shorter

The first two work on text (before encoding); the last two on piece counts (after encoding).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

import numpy as np

REASONS = ("empty", "dedup", "max_tokens", "max_ratio")
_BREAKS = re.compile(r"[\r\n]+")


def normalize(text: str) -> str:
    """Strip surrounding whitespace; line breaks inside a sentence become spaces.

    >>> normalize("  Ein Hund.\\r\\n"), normalize("two\\nlines")
    ('Ein Hund.', 'two lines')
    """
    text = text.strip()
    if "\n" in text or "\r" in text:
        text = _BREAKS.sub(" ", text)
    return text


def normalize_all(lines: Iterable[str]) -> list[str]:
    return [normalize(line) for line in lines]


class PairFilter:
    """Drops empty pairs and, with ``dedup``, pairs seen before; counts what it drops."""

    def __init__(self, dedup: bool = False) -> None:
        self.dedup = dedup
        self._seen: set[bytes] = set()
        self.dropped = {"empty": 0, "dedup": 0}

    def __call__(self, src: list[str], tgt: list[str]) -> tuple[list[str], list[str]]:
        kept_src: list[str] = []
        kept_tgt: list[str] = []
        for s, t in zip(src, tgt, strict=True):
            if not s or not t:
                self.dropped["empty"] += 1
                continue
            if self.dedup and self._seen_before(s, t):
                self.dropped["dedup"] += 1
                continue
            kept_src.append(s)
            kept_tgt.append(t)
        return kept_src, kept_tgt

    def _seen_before(self, src: str, tgt: str) -> bool:
        # normalized text holds no "\n", so the joined key is unambiguous
        key = hashlib.blake2b(f"{src}\n{tgt}".encode(), digest_size=8).digest()
        if key in self._seen:
            return True
        self._seen.add(key)
        return False


def length_mask(
    src_lengths: np.ndarray, tgt_lengths: np.ndarray, max_tokens: int, max_ratio: float
) -> tuple[np.ndarray, dict[str, int]]:
    """Which pairs pass the length filters (0 turns a filter off), and drop counts per reason.

    >>> keep, dropped = length_mask(np.array([3, 9, 1]), np.array([4, 2, 5]), 8, 3.0)
    >>> keep.tolist(), dropped
    ([True, False, False], {'max_tokens': 1, 'max_ratio': 1})
    """
    too_long = np.zeros(len(src_lengths), dtype=bool)
    if max_tokens > 0:
        too_long = (src_lengths > max_tokens) | (tgt_lengths > max_tokens)
    bad_ratio = np.zeros(len(src_lengths), dtype=bool)
    if max_ratio > 0:
        longer = np.maximum(src_lengths, tgt_lengths)
        shorter = np.maximum(np.minimum(src_lengths, tgt_lengths), 1)
        bad_ratio = (longer > max_ratio * shorter) & ~too_long
    keep = ~(too_long | bad_ratio)
    return keep, {"max_tokens": int(too_long.sum()), "max_ratio": int(bad_ratio.sum())}
