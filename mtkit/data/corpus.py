"""Parallel corpus readers: aligned text files, TSV, and Hugging Face datasets, streamed in chunks.

A corpus is named by a string, resolved by :func:`open_source` (``fmt="auto"``):

======================================  =====================================================
SPEC                                    reads
======================================  =====================================================
``PREFIX``                              aligned lines of ``PREFIX.SRC`` and ``PREFIX.TGT``
``FILE.tsv``                            two tab-separated columns: source, target
``FILE.parquet|.json|.jsonl``           rows ``{"translation": {SRC: ..., TGT: ...}}``
``DIR`` (``save_to_disk``)              a Dataset, or the matching split of a DatasetDict
``hf:NAME[:SPLIT]``                     a dataset on the Hugging Face hub (``hf_config``)
======================================  =====================================================

Text and TSV files may be gzip-compressed (``.gz``); their lines are decoded by
:mod:`mtkit.data.lines` (a UTF-8 BOM and CRLF line ends removed, invalid UTF-8 an error).
Readers never hold more than one chunk; ``datasets`` is imported only for HF sources.
"""

from __future__ import annotations

import abc
import contextlib
import gzip
import hashlib
import io
import logging
import re
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import IO, Any

from mtkit.data.lines import decode_lines
from mtkit.errors import MtkitError

Chunk = tuple[list[str], list[str]]  # (source lines, target lines), aligned
FORMATS = ("auto", "text", "tsv", "hf")
HF_FILE_BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json"}
# mtkit split -> HF split names to try (the first is the default for hub datasets)
HF_SPLITS = {"train": ("train",), "valid": ("validation", "valid", "dev"), "test": ("test",)}
BLOCK_SIZE = 1 << 20
_HUB_NAME = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(BLOCK_SIZE):
            digest.update(block)
    return digest.hexdigest()


class _HashingReader(io.RawIOBase):
    """A raw binary reader that feeds every byte it reads into a hash (so files are read once)."""

    def __init__(self, raw: IO[bytes], digest: Any) -> None:
        self.raw, self.digest = raw, digest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = self.raw.readinto(buffer)  # type: ignore[attr-defined]
        self.digest.update(memoryview(buffer)[:count])
        return count


def read_lines(path: str | Path, digest: Any = None) -> Iterator[str]:
    """Yield a UTF-8 text file's lines (``*.gz``: gunzipped), decoded strictly by
    :func:`mtkit.data.lines.decode_lines`: no line ends, CRLF and a BOM removed.

    ``digest`` (a hashlib object) receives the file's bytes as stored on disk. Example:
    ``b"\\xef\\xbb\\xbfa\\r\\nb"`` -> ``"a"``, ``"b"``.
    """
    path = Path(path)
    with open(path, "rb") as raw:
        stored: IO[bytes] = raw
        if digest is not None:
            stored = io.BufferedReader(_HashingReader(raw, digest), BLOCK_SIZE)
        stream = gzip.GzipFile(fileobj=stored, mode="rb") if path.suffix == ".gz" else stored
        try:
            yield from decode_lines(stream, str(path))
        except (OSError, EOFError) as err:  # gzip: not gzipped, or truncated
            raise MtkitError(f"{path}: unreadable ({err})") from None
        if digest is not None:
            while stored.read(BLOCK_SIZE):  # gzip may stop before the end of the file
                pass


class Source(abc.ABC):
    """A parallel corpus: aligned (source, target) chunks, and a description for the manifest."""

    @abc.abstractmethod
    def chunks(self, size: int) -> Iterator[Chunk]:
        """Aligned lists of at most ``size`` lines each, in corpus order."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """Where the data came from: paths and sha256, or HF name, config and split."""

    def sentences(
        self, sides: tuple[str, ...] = ("src", "tgt"), size: int = 10000
    ) -> Iterator[str]:
        """The lines of one or both sides (for sentencepiece training), chunk by chunk."""
        for src, tgt in self.chunks(size):
            if "src" in sides:
                yield from src
            if "tgt" in sides:
                yield from tgt


def _count(lines: Iterator[str]) -> int:
    return sum(1 for _ in lines)


class TextSource(Source):
    """Aligned plain-text files: line i of ``src`` translates line i of ``tgt``."""

    def __init__(self, src: str | Path, tgt: str | Path) -> None:
        self.paths = {"src": Path(src), "tgt": Path(tgt)}
        self._sha256: dict[str, str] = {}
        for path in self.paths.values():
            _check_file(path)

    def _lines(self, side: str) -> Iterator[str]:
        digest = hashlib.sha256()
        yield from read_lines(self.paths[side], digest)
        self._sha256[side] = digest.hexdigest()

    def chunks(self, size: int) -> Iterator[Chunk]:
        src_lines, tgt_lines = self._lines("src"), self._lines("tgt")
        read = 0
        while True:
            src, tgt = list(islice(src_lines, size)), list(islice(tgt_lines, size))
            if len(src) != len(tgt):
                n_src = read + len(src) + _count(src_lines)
                n_tgt = read + len(tgt) + _count(tgt_lines)
                raise MtkitError(
                    f"line counts differ: {self.paths['src']} has {n_src} lines, "
                    f"{self.paths['tgt']} has {n_tgt}"
                )
            if not src:
                return
            read += len(src)
            yield src, tgt

    def sentences(
        self, sides: tuple[str, ...] = ("src", "tgt"), size: int = 10000
    ) -> Iterator[str]:
        if len(sides) == 1:  # one side: no need to read (or align) the other file
            return self._lines(sides[0])
        return super().sentences(sides, size)

    def describe(self) -> dict[str, Any]:
        files = {}
        for side, path in self.paths.items():
            sha = self._sha256.get(side) or sha256_file(path)
            files[side] = {"path": str(path), "sha256": sha}
        return {"type": "text", **files}


class TsvSource(Source):
    """One file of ``source<TAB>target`` lines."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._sha256 = ""
        _check_file(self.path)

    def chunks(self, size: int) -> Iterator[Chunk]:
        digest = hashlib.sha256()
        src: list[str] = []
        tgt: list[str] = []
        for number, line in enumerate(read_lines(self.path, digest), start=1):
            columns = line.split("\t")
            if len(columns) != 2:
                raise MtkitError(
                    f"{self.path}: line {number}: expected 2 tab-separated columns, "
                    f"found {len(columns)}"
                )
            src.append(columns[0])
            tgt.append(columns[1])
            if len(src) == size:
                yield src, tgt
                src, tgt = [], []
        if src:
            yield src, tgt
        self._sha256 = digest.hexdigest()

    def describe(self) -> dict[str, Any]:
        sha = self._sha256 or sha256_file(self.path)
        return {"type": "tsv", "path": str(self.path), "sha256": sha}


class HfSource(Source):
    """A Hugging Face dataset: on the hub, a local parquet/json(l) file, or a saved directory."""

    def __init__(
        self, kind: str, name: str, split: str, langs: tuple[str, str], config: str = ""
    ) -> None:
        self.kind, self.name, self.split, self.langs, self.config = kind, name, split, langs, config
        self._fingerprint: str | None = None  # of a saved dataset, once read
        if kind != "hub":
            _check_file(Path(name), directory=kind == "disk")

    def _load(self) -> Any:
        import datasets  # lazy: a heavy import, needed only here

        if self.kind == "file":
            builder = HF_FILE_BUILDERS[Path(self.name).suffix.lower()]
            # streaming reads the file lazily, without writing an Arrow copy to the HF cache
            return datasets.load_dataset(
                builder, data_files=self.name, split="train", streaming=True
            )
        if self.kind == "disk":
            return _pick_split(datasets.load_from_disk(self.name), self.name, self.split)
        return datasets.load_dataset(self.name, self.config or None, split=self.split)

    def _open(self) -> Any:
        try:
            return self._load()
        except MtkitError:
            raise
        except ValueError as err:  # unknown config or split
            raise MtkitError(f"{self.name}: {_first_line(err)}") from None
        except Exception as err:  # datasets raises many types for "not found"
            if self.kind == "hub":
                raise MtkitError(f"unknown dataset {self.name} ({_first_line(err)})") from None
            raise MtkitError(f"{self.name}: not a readable dataset ({_first_line(err)})") from None

    def chunks(self, size: int) -> Iterator[Chunk]:
        dataset = self._open()
        self._fingerprint = getattr(dataset, "_fingerprint", None)
        batches = dataset.iter(batch_size=size)
        while True:
            try:
                with _quiet_datasets():  # it logs a bad file's error, which we raise below
                    batch = next(batches)
            except StopIteration:
                return
            except Exception as err:  # pyarrow/json errors from a bad file
                raise MtkitError(f"{self.name}: unreadable ({_first_line(err)})") from None
            yield self._columns(batch)

    def _columns(self, batch: dict[str, list[Any]]) -> Chunk:
        src_lang, tgt_lang = self.langs
        if "translation" in batch:
            rows = batch["translation"]
            for lang in self.langs:
                if rows and (not isinstance(rows[0], dict) or lang not in rows[0]):
                    found = sorted(rows[0]) if isinstance(rows[0], dict) else type(rows[0]).__name__
                    raise MtkitError(f"{self.name}: no '{lang}' in 'translation' (found {found})")
            return [r[src_lang] or "" for r in rows], [r[tgt_lang] or "" for r in rows]
        if src_lang in batch and tgt_lang in batch:
            return [t or "" for t in batch[src_lang]], [t or "" for t in batch[tgt_lang]]
        raise MtkitError(
            f"{self.name}: expected a 'translation' column or '{src_lang}' and '{tgt_lang}' "
            f"columns, found {sorted(batch)}"
        )

    def describe(self) -> dict[str, Any]:
        if self.kind == "hub":
            return {"type": "hf", "name": self.name, "config": self.config, "split": self.split}
        if self.kind == "file":
            return {"type": "hf-file", "path": self.name, "sha256": sha256_file(self.name)}
        info = {"type": "hf-disk", "path": self.name, "split": self.split}
        return {**info, "fingerprint": self._fingerprint}


@contextlib.contextmanager
def _quiet_datasets() -> Iterator[None]:
    """Silence the ``datasets`` loggers (errors included) for the duration."""
    logger = logging.getLogger("datasets")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _check_file(path: Path, directory: bool = False) -> None:
    if not path.exists():
        raise MtkitError(f"{path}: no such {'directory' if directory else 'file'}")
    if path.is_dir() != directory:
        raise MtkitError(f"{path}: {'not a directory' if directory else 'is a directory'}")


def _pick_split(dataset: Any, where: str, split: str) -> Any:
    """The split of a DatasetDict (trying HF's names for mtkit's), or a plain Dataset as is."""
    if not hasattr(dataset, "keys"):
        return dataset
    names = (split,) if split not in HF_SPLITS else HF_SPLITS[split]
    for name in names:
        if name in dataset:
            return dataset[name]
    raise MtkitError(f"{where}: no split {' or '.join(names)} (has {', '.join(dataset)})")


def _text_paths(prefix: str, langs: tuple[str, str]) -> tuple[Path, Path] | None:
    """PREFIX.SRC and PREFIX.TGT (or their .gz), if either exists."""
    paths = []
    for lang in langs:
        plain, packed = Path(f"{prefix}.{lang}"), Path(f"{prefix}.{lang}.gz")
        paths.append(packed if packed.exists() and not plain.exists() else plain)
    return (paths[0], paths[1]) if any(p.exists() for p in paths) else None


def _hf_source(spec: str, split: str, langs: tuple[str, str], config: str) -> HfSource:
    """``NAME[:SPLIT]``: a local file or saved directory, else a hub dataset."""
    name, _, explicit = spec.partition(":")
    path = Path(name)
    if path.is_dir():
        return HfSource("disk", name, explicit or split, langs)
    if path.suffix.lower() in HF_FILE_BUILDERS:
        return HfSource("file", name, "train", langs)
    hub_split = explicit or HF_SPLITS.get(split, (split,))[0]
    return HfSource("hub", name, hub_split, langs, config)


def open_source(
    spec: str,
    src_lang: str,
    tgt_lang: str,
    split: str = "train",
    fmt: str = "auto",
    hf_config: str = "",
) -> Source:
    """Resolve a corpus SPEC (see the module docstring) for one split (train, valid or test)."""
    langs = (src_lang, tgt_lang)
    if fmt not in FORMATS:
        raise MtkitError(f"unknown corpus format {fmt!r} (choose from {', '.join(FORMATS)})")
    if not spec:
        raise MtkitError(f"empty corpus name for the {split} split")
    if fmt == "hf" or spec.startswith("hf:"):
        return _hf_source(spec.removeprefix("hf:"), split, langs, hf_config)
    if fmt == "tsv":
        return TsvSource(spec)
    text = _text_paths(spec, langs)
    if fmt == "text" or text is not None:
        return TextSource(*(text or (f"{spec}.{src_lang}", f"{spec}.{tgt_lang}")))
    path = Path(spec)
    if path.name.lower().removesuffix(".gz").endswith(".tsv"):
        return TsvSource(path)
    if path.suffix.lower() in HF_FILE_BUILDERS:
        return HfSource("file", spec, "train", langs)
    if path.is_dir():
        return HfSource("disk", spec, split, langs)
    if hf_config and not path.exists() and _HUB_NAME.match(spec):
        return HfSource("hub", spec, HF_SPLITS.get(split, (split,))[0], langs, hf_config)
    raise MtkitError(
        f"{spec}: no such corpus (looked for {spec}.{src_lang} and {spec}.{tgt_lang}; "
        f"other sources: FILE.tsv, FILE.parquet, FILE.jsonl, a saved dataset directory, hf:NAME)"
    )
