"""`mtkit shortlist build`: learn a lexical shortlist from a prepared dataset's training split
(:mod:`mtkit.data.lexicon`) and write it (:mod:`mtkit.data.shortlist`), whole or not at all."""

from __future__ import annotations

import time
from pathlib import Path

from mtkit.config import ShortlistConfig
from mtkit.data.binarized import ParallelData, load_tokenizers
from mtkit.data.lexicon import learn_shortlist
from mtkit.data.shortlist import Shortlist
from mtkit.errors import MtkitError, naming_output
from mtkit.staging import staged_file


def build_shortlist(cfg: ShortlistConfig) -> tuple[Shortlist, float]:
    """Learn the shortlist ``cfg`` asks for and write it to ``cfg.output``; it and the seconds
    it took. Options and the dataset are checked before anything is written."""
    if not cfg.data:
        raise MtkitError("--data: the dataset directory to learn from is required")
    if not cfg.output:
        raise MtkitError("-o/--output: the shortlist file to write is required")
    if Path(cfg.output).is_dir():
        raise MtkitError(f"-o {cfg.output}: is a directory")
    start = time.perf_counter()
    data = ParallelData(cfg.data, "train")
    src, tgt = load_tokenizers(cfg.data)
    shortlist = learn_shortlist(data, src, tgt, cfg.top_k, cfg.frequent, cfg.method, cfg.iterations)
    with naming_output(cfg.output), staged_file(cfg.output) as handle:
        shortlist.write(handle)
    return shortlist, time.perf_counter() - start


def summary(shortlist: Shortlist, output: str, seconds: float) -> str:
    """One line about a written shortlist."""
    sizes = [len(row) for row in shortlist.candidates if row]
    mean = sum(sizes) / len(sizes) if sizes else 0.0
    return (
        f"{output}: {shortlist.method} shortlist, top {shortlist.top_k} of "
        f"{len(sizes)} source pieces (mean {mean:.1f}) + {len(shortlist.frequent)} frequent "
        f"target pieces, in {seconds:.1f} s"
    )
