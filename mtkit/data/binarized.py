"""The binarized dataset directory that `mtkit prepare` writes and `mtkit train` memory-maps.

Layout of a dataset directory::

    manifest.json            languages, sources and hashes, filters, counts (see prepare)
    spm.src.model            the source sentencepiece model (bytes, as trained)
    spm.tgt.model            the target model (a copy of the source one for a joint vocabulary)
    vocab.json               (only with an imported vocabulary, ``prepare --tokenizer-from``)
                             {"vocab": {"src": [...], "tgt": [...]}, "special_ids": {...}}:
                             the ids below are that table's, not the sentencepiece ids
    {split}.src.bin          all source token ids of the split, flat, dtype from the manifest
    {split}.src.idx          int64 offsets, n+1 entries: sentence i is bin[idx[i]:idx[i+1]]
    {split}.tgt.bin / .idx   the same for the target side
    {split}.src.txt          (valid/test) the kept source lines, for decoding and BLEU (in a
                             multilingual dataset each starts with its tag, ``>>xx<< ``)
    {split}.tgt.txt          (valid/test) the kept reference lines

Token ids exclude BOS and EOS: batching adds them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from mtkit.data.tokenizer import SpecialIds, Tokenizer
from mtkit.errors import MtkitError

MANIFEST = "manifest.json"
VOCAB = "vocab.json"
FORMAT_VERSION = 1
SIDES = ("src", "tgt")


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 65536 else np.dtype(np.int32)


def read_manifest(data_dir: str | Path) -> dict[str, Any]:
    path = Path(data_dir) / MANIFEST
    if not path.is_file():
        raise MtkitError(f"{data_dir}: not an mtkit dataset (no {MANIFEST}; run `mtkit prepare`)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise MtkitError(f"{path}: unreadable manifest ({err})") from None
    if manifest.get("format_version") != FORMAT_VERSION:
        raise MtkitError(
            f"{path}: dataset format {manifest.get('format_version')!r}, this mtkit reads "
            f"{FORMAT_VERSION}: prepare the data again"
        )
    return manifest


def load_tokenizers(data_dir: str | Path) -> tuple[Tokenizer, Tokenizer]:
    """The dataset's source and target tokenizers (with its imported vocabulary, if any)."""
    data_dir = Path(data_dir)
    if not (data_dir / VOCAB).is_file():
        return (
            Tokenizer.from_file(data_dir / "spm.src.model"),
            Tokenizer.from_file(data_dir / "spm.tgt.model"),
        )
    try:
        table = json.loads((data_dir / VOCAB).read_text(encoding="utf-8"))
        vocab, ids = table["vocab"], SpecialIds.from_dict(table["special_ids"])
        src, tgt = vocab["src"], vocab["tgt"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as err:
        raise MtkitError(f"{data_dir / VOCAB}: unreadable vocabulary ({err})") from None
    return tuple(  # type: ignore[return-value]
        Tokenizer(
            (data_dir / f"spm.{side}.model").read_bytes(),
            str(data_dir / f"spm.{side}.model"),
            table_,
            ids,
        )
        for side, table_ in (("src", src), ("tgt", tgt))
    )


class SplitWriter:
    """Streams encoded pairs of one split to ``{split}.{src,tgt}.{bin,idx}``."""

    def __init__(self, out_dir: str | Path, split: str, dtype: np.dtype) -> None:
        self.dtype = np.dtype(dtype)
        self.count = 0
        self.tokens = {side: 0 for side in SIDES}
        out_dir = Path(out_dir)
        self._bin = {side: open(out_dir / f"{split}.{side}.bin", "wb") for side in SIDES}
        self._idx = {side: open(out_dir / f"{split}.{side}.idx", "wb") for side in SIDES}
        for side in SIDES:
            self._idx[side].write(np.zeros(1, dtype=np.int64).tobytes())

    def add_many(self, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]]) -> None:
        if len(src) != len(tgt):
            raise ValueError(f"{len(src)} source but {len(tgt)} target sentences")
        arrays = []
        for seqs in (src, tgt):
            lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
            flat = np.fromiter(chain.from_iterable(seqs), dtype=self.dtype, count=lengths.sum())
            arrays += [flat, lengths]
        self.add_arrays(*arrays)

    def add_arrays(
        self, src: np.ndarray, src_lengths: np.ndarray, tgt: np.ndarray, tgt_lengths: np.ndarray
    ) -> None:
        """Append pairs given as each side's flat token ids plus per-sentence lengths."""
        if len(src_lengths) != len(tgt_lengths):
            raise ValueError(f"{len(src_lengths)} source but {len(tgt_lengths)} target lengths")
        for side, flat, lengths in (("src", src, src_lengths), ("tgt", tgt, tgt_lengths)):
            lengths = np.asarray(lengths, dtype=np.int64)
            total = int(lengths.sum())
            if len(flat) != total:
                raise ValueError(f"{side}: {len(flat)} tokens but lengths sum to {total}")
            self._bin[side].write(np.asarray(flat, dtype=self.dtype).tobytes())
            self._idx[side].write((self.tokens[side] + np.cumsum(lengths)).tobytes())
            self.tokens[side] += total
        self.count += len(src_lengths)

    def close(self) -> None:
        for handle in (*self._bin.values(), *self._idx.values()):
            handle.close()

    def __enter__(self) -> SplitWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _directions(counts: Any, n: int) -> dict[str, tuple[int, int]]:
    """A multilingual split's directions: name -> [start, stop) of its pairs (the manifest
    counts each under ``directions``, in the order written); {} for a one-direction split."""
    found, start = {}, 0
    directions = counts.get("directions", {}) if isinstance(counts, dict) else {}
    for name, pair_counts in directions.items():
        found[name] = (start, start + int(pair_counts["kept"]))
        start = found[name][1]
    if found and start != n:
        raise MtkitError(f"the manifest counts {start} pairs in its directions, the split has {n}")
    return found


class ParallelData:
    """One split of a binarized dataset, memory-mapped."""

    def __init__(self, data_dir: str | Path, split: str) -> None:
        self.data_dir = Path(data_dir)
        self.split = split
        manifest = read_manifest(data_dir)
        if split not in manifest.get("splits", {}):
            raise MtkitError(f"{data_dir}: dataset has no '{split}' split")
        dtype = np.dtype(manifest["dtype"])
        self._tokens, self._offsets = {}, {}
        for side in SIDES:
            base = self.data_dir / f"{split}.{side}"
            try:
                idx = np.fromfile(f"{base}.idx", dtype=np.int64)
                size = Path(f"{base}.bin").stat().st_size
            except FileNotFoundError as err:
                raise MtkitError(f"{err.filename}: missing from the dataset") from None
            if len(idx) == 0 or idx[-1] * dtype.itemsize != size:
                raise MtkitError(f"{base}.bin: size does not match its index (truncated?)")
            self._offsets[side] = idx
            self._tokens[side] = (
                np.memmap(f"{base}.bin", dtype=dtype, mode="r") if size else np.zeros(0, dtype)
            )
        if len(self._offsets["src"]) != len(self._offsets["tgt"]):
            raise MtkitError(f"{self.data_dir}: {split} source and target counts differ")
        self.src_lengths = np.diff(self._offsets["src"])
        self.tgt_lengths = np.diff(self._offsets["tgt"])
        self.directions = _directions(manifest["splits"][split], len(self))

    def __len__(self) -> int:
        return len(self.src_lengths)

    def longest_source(self) -> int | None:
        """The most pieces a source of the split has (None for an empty split)."""
        return int(self.src_lengths.max()) if len(self) else None

    def decoded_sources(self, tokenizer: Tokenizer, limit: int) -> list[str]:
        """At most ``limit`` source sentences as text, spread evenly over the split."""
        step = max(1, -(-len(self) // limit))
        return tokenizer.decode(self.side("src", i) for i in range(0, len(self), step))

    def side(self, side: str, i: int) -> np.ndarray:
        offsets = self._offsets[side]
        return np.asarray(self._tokens[side][offsets[i] : offsets[i + 1]], dtype=np.int64)

    def flat(self, side: str) -> tuple[np.ndarray, np.ndarray]:
        """Every sentence of ``side`` at once: the token ids (int64) and the n + 1 offsets
        (sentence i is ``ids[offsets[i]:offsets[i + 1]]``)."""
        return np.asarray(self._tokens[side], dtype=np.int64), self._offsets[side]

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self.side("src", i), self.side("tgt", i)

    def text(self, side: str) -> list[str]:
        """The kept raw lines of a valid/test split (for decoding and BLEU)."""
        path = self.data_dir / f"{self.split}.{side}.txt"
        if not path.is_file():
            raise MtkitError(f"{path}: missing (only valid/test splits keep their text)")
        return path.read_text(encoding="utf-8").split("\n")[: len(self)]
