"""Multilingual datasets (issue 16): the corpora of each split, one per direction, and the
manifest entries that count each one (`mtkit prepare --pair SRC-TGT=SOURCE`)."""

from __future__ import annotations

from typing import Any

from mtkit.config import PrepareConfig
from mtkit.data.corpus import Source, open_source
from mtkit.data.tags import Direction, parse_pairs

SPLITS = ("train", "valid", "test")
Entry = tuple[Direction | None, Source]  # one corpus of a split (a direction, or the only one)


def is_multilingual(cfg: PrepareConfig) -> bool:
    return bool(cfg.pairs or cfg.valid_pairs or cfg.test_pairs)


PAIR_OPTIONS = {"train": "pairs", "valid": "valid_pairs", "test": "test_pairs"}


def pair_option(split: str) -> str:
    """The option that gives a split's directions: --pair, --valid-pair, --test-pair."""
    return "--pair" if split == "train" else f"--{split}-pair"


def entries_of(cfg: PrepareConfig) -> dict[str, list[Entry]]:
    """Each split's corpora: one (``--train`` ...), or one per direction (``--pair`` ...)."""
    if not is_multilingual(cfg):
        return {
            split: [
                (
                    None,
                    open_source(
                        getattr(cfg, split),
                        cfg.src_lang,
                        cfg.tgt_lang,
                        split,
                        cfg.format,
                        cfg.hf_config,
                    ),
                )
            ]
            for split in SPLITS
            if getattr(cfg, split)
        }
    entries = {}
    for split, field in PAIR_OPTIONS.items():
        directions = parse_pairs(getattr(cfg, field), pair_option(split))
        if directions:
            entries[split] = [
                (d, open_source(d.source, d.src, d.tgt, split, cfg.format, cfg.hf_config))
                for d in directions
            ]
    return entries


def languages(entries: dict[str, list[Entry]], cfg: PrepareConfig) -> tuple[str, str]:
    """The manifest's src_lang and tgt_lang: each side's languages, comma-separated."""
    directions = [d for rows in entries.values() for d, _ in rows if d is not None]
    if not directions:
        return cfg.src_lang, cfg.tgt_lang
    return tuple(
        ",".join(dict.fromkeys(getattr(d, side) for d in directions)) for side in ("src", "tgt")
    )  # type: ignore[return-value]


def totals(per_entry: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A split's counts: its one corpus's, or the sum of its directions' plus each one's."""
    if list(per_entry) == [""]:
        return per_entry[""]
    rows = list(per_entry.values())
    dropped = {r: sum(c["dropped"][r] for c in rows) for r in rows[0]["dropped"]}
    tokens = {side: sum(c["tokens"][side] for c in rows) for side in ("src", "tgt")}
    return {
        "read": sum(c["read"] for c in rows),
        "kept": sum(c["kept"] for c in rows),
        "dropped": dropped,
        "tokens": tokens,
        "directions": per_entry,
    }


def describe(rows: list[Entry]) -> dict[str, Any]:
    if rows[0][0] is None:
        return rows[0][1].describe()
    return {d.name: source.describe() for d, source in rows if d is not None}
