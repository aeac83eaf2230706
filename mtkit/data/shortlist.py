"""A lexical shortlist: for each source piece, the target pieces it likely translates to, plus
the target pieces any sentence may need (the most frequent ones). Decoding a batch then scores
only the union of its sentences' entries (Marian's ``--shortlist``, Sockeye's vocabulary
selection, CTranslate2's vocabulary map); :mod:`mtkit.data.lexicon` learns one from a dataset.

The file (`mtkit shortlist build -o FILE`) is gzip-compressed JSON, one object::

    format          "mtkit-shortlist"
    version         1
    method          how the candidates were ranked (ibm1: p(target | source) after IBM model 1's
                    EM; dice: Dice's coefficient of sentence co-occurrence)
    top_k           candidates kept per source piece (at most)
    src_sha256, tgt_sha256          the sentencepiece models it was built for (Tokenizer.sha256)
    src_vocab_size, tgt_vocab_size  their sizes
    frequent        target ids, the most frequent first
    candidates      one list per source id: its target ids, the best first

Plain data only: nothing in it is executed, and ids are checked against the sizes on load.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from mtkit.data.tokenizer import Tokenizer
from mtkit.errors import MtkitError

FORMAT = "mtkit-shortlist"
VERSION = 1


@dataclass(frozen=True)
class Shortlist:
    """Ranked target candidates per source id (``candidates``) and the frequent targets."""

    candidates: tuple[tuple[int, ...], ...]  # per source id, best first
    frequent: tuple[int, ...]  # most frequent first
    src_sha256: str
    tgt_sha256: str
    src_vocab_size: int
    tgt_vocab_size: int
    method: str
    top_k: int
    # the candidates as one flat array and each source id's [start, stop) into it
    _flat: np.ndarray = field(init=False, repr=False, compare=False)
    _offsets: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.candidates) != self.src_vocab_size:
            raise MtkitError(
                f"shortlist: {len(self.candidates)} candidate lists for "
                f"{self.src_vocab_size} source pieces"
            )
        flat = [t for row in self.candidates for t in row] + list(self.frequent)
        if flat and not (0 <= min(flat) and max(flat) < self.tgt_vocab_size):
            raise MtkitError(f"shortlist: a target id outside 0..{self.tgt_vocab_size - 1}")
        sizes = np.fromiter(map(len, self.candidates), np.int64, len(self.candidates))
        offsets = np.zeros(len(sizes) + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        object.__setattr__(self, "_offsets", offsets)
        object.__setattr__(
            self,
            "_flat",
            np.fromiter((t for row in self.candidates for t in row), np.int64, int(offsets[-1])),
        )

    def cut(self, top_k: int, frequent: int) -> Shortlist:
        """The shortlist a build with smaller ``top_k`` and ``frequent`` would have written."""
        return replace(
            self,
            candidates=tuple(row[:top_k] for row in self.candidates),
            frequent=self.frequent[:frequent],
            top_k=min(top_k, self.top_k),
        )

    def union(self, rows: Iterable[Sequence[int]], always: Iterable[int] = ()) -> np.ndarray:
        """The sorted target ids a batch may produce: the frequent ones, ``always`` (the special
        ids) and the candidates of every source id in ``rows`` (ids out of range have none)."""
        keep = np.zeros(self.tgt_vocab_size, dtype=bool)
        keep[list(self.frequent)] = True
        keep[list(always)] = True
        sources = np.unique(np.fromiter((s for row in rows for s in row), np.int64))
        sources = sources[(sources >= 0) & (sources < self.src_vocab_size)]
        if len(sources):
            starts, stops = self._offsets[sources].tolist(), self._offsets[sources + 1].tolist()
            spans = [self._flat[a:b] for a, b in zip(starts, stops, strict=True)]
            keep[np.concatenate(spans)] = True
        return np.flatnonzero(keep)

    def check_vocabularies(self, src: Tokenizer, tgt: Tokenizer, where: str) -> None:
        """Refuse, in one line, a shortlist built for other sentencepiece models."""
        for side, tok, sha in (("source", src, self.src_sha256), ("target", tgt, self.tgt_sha256)):
            if tok.sha256 != sha:
                raise MtkitError(
                    f"{where}: built for another {side} vocabulary (sentencepiece sha256 "
                    f"{sha[:12]}, the model's is {tok.sha256[:12]}); build it from the model's "
                    "dataset with `mtkit shortlist build`"
                )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "method": self.method,
            "top_k": self.top_k,
            "src_sha256": self.src_sha256,
            "tgt_sha256": self.tgt_sha256,
            "src_vocab_size": self.src_vocab_size,
            "tgt_vocab_size": self.tgt_vocab_size,
            "frequent": list(self.frequent),
            "candidates": [list(row) for row in self.candidates],
        }

    def write(self, handle: Any) -> None:
        """The gzip'd JSON file into a binary ``handle``."""
        data = json.dumps(self.to_dict(), separators=(",", ":")).encode("utf-8")
        handle.write(gzip.compress(data, compresslevel=6, mtime=0))


def _ids(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(type(x) is int for x in value):
        raise MtkitError(f"{what} is not a list of integers")
    return tuple(value)


def read_shortlist(path: str | Path) -> Shortlist:
    """The shortlist in ``path``; a one-line error for a missing, damaged or foreign file."""
    path = Path(path)
    if not path.is_file():
        raise MtkitError(f"{path}: no such shortlist file (`mtkit shortlist build` writes one)")
    try:
        data = json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
    except (OSError, EOFError, ValueError, UnicodeDecodeError) as err:
        raise MtkitError(f"{path}: not a shortlist file ({err})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise MtkitError(f'{path}: not an mtkit shortlist (no "format": "{FORMAT}")')
    if data.get("version") != VERSION:
        raise MtkitError(
            f"{path}: shortlist version {data.get('version')!r}, this mtkit reads "
            f"{VERSION}: build it again"
        )
    try:
        rows = data["candidates"]
        if not isinstance(rows, list):
            raise MtkitError(f"{path}: candidates is not a list")
        return Shortlist(
            tuple(_ids(row, f"{path}: candidates of source id {i}") for i, row in enumerate(rows)),
            _ids(data["frequent"], f"{path}: frequent"),
            str(data["src_sha256"]),
            str(data["tgt_sha256"]),
            int(data["src_vocab_size"]),
            int(data["tgt_vocab_size"]),
            str(data["method"]),
            int(data["top_k"]),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise MtkitError(f"{path}: damaged shortlist ({type(err).__name__}: {err})") from None
    except MtkitError as err:
        message = str(err)
        named = message if message.startswith(str(path)) else f"{path}: {message}"
        raise MtkitError(named) from None


def read_shortlist_for(path: str | Path, src: Tokenizer, tgt: Tokenizer, option: str) -> Shortlist:
    """The shortlist in ``path``, refused in one line naming ``option`` where it was built for
    other vocabularies than ``src`` and ``tgt``."""
    shortlist = read_shortlist(path)
    shortlist.check_vocabularies(src, tgt, f"{option} {path}")
    return shortlist
