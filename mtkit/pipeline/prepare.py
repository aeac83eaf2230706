"""`mtkit prepare`: read a parallel corpus, clean it, encode it with sentencepiece, binarize it.

Each split streams: chunks are read lazily, cleaned in this process, encoded in worker processes
(:mod:`mtkit.data.encoding`: each loads the models once; at most ``2 * workers`` chunks in
flight) and written in corpus order as they come back, so memory stays bounded whatever the
corpus size. A split that fits in one chunk is encoded in this process, where a pool cannot
help. Everything is written into a temporary directory next to ``out_dir`` and renamed at the
end; on any error it is removed.

Length, ratio and duplicate filters apply to the train split only: valid and test keep every
line (stripped), so their outputs stay aligned with the original references.

A multilingual dataset (``--pair SRC-TGT=SOURCE`` repeated, ``--valid-pair``, ``--test-pair``)
writes its corpora one after the other into the same splits, each source prefixed with its
target language's tag (:mod:`mtkit.data.tags`): the tag's id in the binaries, ``>>xx<< `` in
the text files. Filters see the sentences without their tags. The manifest lists the
directions and counts each one under ``splits.SPLIT.directions``, in the order written.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import asdict
from itertools import compress
from pathlib import Path
from typing import Any

from mtkit import __version__
from mtkit.config import PrepareConfig
from mtkit.data.binarized import FORMAT_VERSION, MANIFEST, VOCAB, SplitWriter, token_dtype
from mtkit.data.cleaning import REASONS, PairFilter, normalize_all
from mtkit.data.corpus import Source
from mtkit.data.encoding import EncoderPool, Job
from mtkit.data.tags import check_tags, tag
from mtkit.data.tokenizer import Tokenizer
from mtkit.errors import MtkitError, naming_output
from mtkit.pipeline.multilingual import (
    Entry,
    describe,
    entries_of,
    is_multilingual,
    languages,
    pair_option,
    totals,
)
from mtkit.pipeline.signals import interruptible
from mtkit.staging import check_out_dir, staged_dir

SPLITS = ("train", "valid", "test")
FILTERED_SPLITS = ("train",)


def _jobs(
    source: Source, cfg: PrepareConfig, split: str, counts: dict[str, Any], tag_id: int
) -> Iterator[Job]:
    """Read, strip and (train) filter chunks; count the pairs read and dropped."""
    filtered = split in FILTERED_SPLITS
    pair_filter = PairFilter(dedup=cfg.dedup) if filtered else None
    for src, tgt in source.chunks(cfg.chunk_size):
        counts["read"] += len(src)
        src, tgt = normalize_all(src), normalize_all(tgt)
        if pair_filter is not None:
            src, tgt = pair_filter(src, tgt)
            counts["dropped"].update(pair_filter.dropped)
        if src:
            yield src, tgt, filtered, tag_id


def _write_split(
    split: str,
    entries: list[Entry],
    cfg: PrepareConfig,
    encoder: EncoderPool,
    out: Path,
    tag_ids: dict[str, int],
) -> dict[str, Any]:
    """Encode one split's corpora into ``out``; return its counts for the manifest."""
    with contextlib.ExitStack() as stack:
        writer = stack.enter_context(SplitWriter(out, split, encoder.local.dtype))
        texts = None
        if split not in FILTERED_SPLITS:
            texts = [
                stack.enter_context(
                    open(out / f"{split}.{side}.txt", "w", encoding="utf-8", newline="\n")
                )
                for side in ("src", "tgt")
            ]
        per_entry = {}
        for direction, source in entries:
            prefix = f"{tag(direction.tgt)} " if direction else ""
            tag_id = tag_ids[direction.tgt] if direction else -1
            before = writer.count, dict(writer.tokens)
            counts: dict[str, Any] = {"read": 0, "dropped": {}}
            if split in FILTERED_SPLITS:
                counts["dropped"] = dict.fromkeys(REASONS, 0)
            jobs = _jobs(source, cfg, split, counts, tag_id)
            for (src, tgt, *_), enc in encoder.map(jobs):
                writer.add_arrays(enc.src, enc.src_lengths, enc.tgt, enc.tgt_lengths)
                for reason, n in enc.dropped.items():
                    counts["dropped"][reason] += n
                if texts is not None:
                    kept = [list(compress(lines, enc.keep)) for lines in (src, tgt)]
                    texts[0].write("".join(f"{prefix}{line}\n" for line in kept[0]))
                    texts[1].write("".join(f"{line}\n" for line in kept[1]))
            counts["kept"] = writer.count - before[0]
            counts["tokens"] = {k: v - before[1][k] for k, v in writer.tokens.items()}
            per_entry[direction.name if direction else ""] = counts
    return totals(per_entry)


def resolve_tokenizers(cfg: PrepareConfig) -> tuple[Tokenizer, Tokenizer, Path, Path]:
    """(source, target, source path, target path): the spm models, or a checkpoint's models
    and vocabulary (``--tokenizer-from``)."""
    if cfg.tokenizer_from and (cfg.src_spm or cfg.tgt_spm):
        raise MtkitError("give --spm (--src-spm/--tgt-spm) or --tokenizer-from, not both")
    if cfg.tokenizer_from:
        from mtkit.checkpoint import Checkpoint

        path = Path(cfg.tokenizer_from)
        return (*Checkpoint.load(path).tokenizers(), path, path)
    src_path, tgt_path = resolve_spm(cfg)
    return Tokenizer.from_file(src_path), Tokenizer.from_file(tgt_path), src_path, tgt_path


def resolve_spm(cfg: PrepareConfig) -> tuple[Path, Path]:
    """The source and target model paths; ``--spm PREFIX`` finds `mtkit spm train` outputs."""
    if not cfg.src_spm:
        raise MtkitError(
            "no sentencepiece model: give --spm MODEL (or --src-spm and --tgt-spm); "
            "train one with `mtkit spm train`"
        )
    if cfg.tgt_spm:
        return Path(cfg.src_spm), Path(cfg.tgt_spm)
    given = Path(cfg.src_spm)
    joint = Path(f"{given}.model")
    per_lang = Path(f"{given}.{cfg.src_lang}.model"), Path(f"{given}.{cfg.tgt_lang}.model")
    if not given.exists() and joint.is_file():
        return joint, joint
    if not given.exists() and all(p.is_file() for p in per_lang):
        return per_lang
    return given, given


def _check_config(cfg: PrepareConfig) -> None:
    if is_multilingual(cfg) and any(getattr(cfg, split) for split in SPLITS):
        raise MtkitError(
            "give --pair/--valid-pair/--test-pair, or --train/--valid/--test, not both"
        )
    if not is_multilingual(cfg) and (
        cfg.src_lang == cfg.tgt_lang or not cfg.src_lang or not cfg.tgt_lang
    ):
        raise MtkitError(f"need two different languages, got {cfg.src_lang!r}, {cfg.tgt_lang!r}")
    if not any(getattr(cfg, split) for split in SPLITS) and not is_multilingual(cfg):
        raise MtkitError("nothing to prepare: give at least one of --train, --valid, --test")
    if cfg.workers < 0 or cfg.chunk_size < 1 or cfg.max_tokens < 0:
        raise MtkitError("--workers and --max-tokens must be >= 0, --chunk-size >= 1")
    if cfg.max_ratio != 0 and cfg.max_ratio < 1:
        raise MtkitError(f"--max-ratio must be 0 (off) or >= 1, got {cfg.max_ratio}")


def _check_counts(cfg: PrepareConfig, splits: dict[str, dict[str, Any]]) -> None:
    """Refuse a corpus with nothing in it: an empty one, or every pair dropped."""
    for split, split_counts in splits.items():
        rows = split_counts.get("directions") or {"": split_counts}
        for name, counts in rows.items():
            _check_corpus(cfg, split, name, counts)


def _check_corpus(cfg: PrepareConfig, split: str, name: str, counts: dict[str, Any]) -> None:
    where = f"--{split} {getattr(cfg, split)}"
    if name:
        where = f"{pair_option(split)} {name}"
    if counts["read"] == 0:
        raise MtkitError(f"{where}: empty corpus (no sentence pairs)")
    if counts["kept"] == 0:
        reasons = ", ".join(f"{r} {n}" for r, n in counts["dropped"].items() if n)
        raise MtkitError(f"{where}: all {counts['read']} pairs were dropped ({reasons})")


def prepare(cfg: PrepareConfig) -> dict[str, Any]:
    """Write the binarized dataset ``cfg.out_dir``; return its manifest."""
    _check_config(cfg)
    out = Path(cfg.out_dir)
    check_out_dir(out, cfg.force)
    src_tok, tgt_tok, src_path, tgt_path = resolve_tokenizers(cfg)
    entries = entries_of(cfg)
    tgt_langs = {d.tgt for rows in entries.values() for d, _ in rows if d is not None}
    check_tags([tag(lang) for lang in sorted(tgt_langs)], src_tok.tags, str(src_path))
    tag_ids = {lang: src_tok.piece_to_id(tag(lang)) for lang in tgt_langs}
    dtype = token_dtype(max(len(src_tok), len(tgt_tok)))
    args = (src_tok.state(), tgt_tok.state(), cfg.max_tokens, cfg.max_ratio, dtype.name)
    with interruptible(), staged_dir(out, cfg.force) as tmp, naming_output(str(out)):
        (tmp / "spm.src.model").write_bytes(src_tok.proto)
        (tmp / "spm.tgt.model").write_bytes(tgt_tok.proto)
        if src_tok.vocab is not None:  # ids are the checkpoint's table (data.binarized.VOCAB)
            table = {
                "vocab": {"src": src_tok.vocab, "tgt": tgt_tok.pieces_by_id()},
                "special_ids": tgt_tok.specials.to_dict(),
            }
            (tmp / VOCAB).write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
        with EncoderPool(args, cfg.workers) as encoder:
            splits = {
                split: _write_split(split, rows, cfg, encoder, tmp, tag_ids)
                for split, rows in entries.items()
            }
        _check_counts(cfg, splits)
        src_lang, tgt_lang = languages(entries, cfg)
        manifest = {
            "format_version": FORMAT_VERSION,
            "created_by": f"mtkit {__version__}",
            "src_lang": src_lang,
            "tgt_lang": tgt_lang,
            "dtype": dtype.name,
            "joint": (
                src_tok.sha256 == tgt_tok.sha256
                if src_tok.vocab is None
                else src_tok.vocab == tgt_tok.vocab
            ),
            "spm": {
                side: {"path": str(path), "sha256": tok.sha256, "vocab_size": len(tok)}
                for side, path, tok in (("src", src_path, src_tok), ("tgt", tgt_path, tgt_tok))
            },
            "sources": {split: describe(rows) for split, rows in entries.items()},
            "filters": {
                "strip": True,
                "empty": True,
                "dedup": cfg.dedup,
                "max_tokens": cfg.max_tokens,
                "max_ratio": cfg.max_ratio,
                "splits": list(FILTERED_SPLITS),
            },
            "splits": splits,
            "config": asdict(cfg),
        }
        if tag_ids:
            manifest["tags"] = {lang: tag(lang) for lang in sorted(tag_ids)}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def summary(manifest: dict[str, Any], out_dir: str) -> str:
    """A few human-readable lines about a prepared dataset."""
    src, tgt = manifest["src_lang"], manifest["tgt_lang"]
    spm = manifest["spm"]
    vocab = (
        f"joint vocabulary {spm['src']['vocab_size']}"
        if manifest["joint"]
        else f"vocabularies {spm['src']['vocab_size']}/{spm['tgt']['vocab_size']}"
    )
    lines = [f"prepared {out_dir}: {src}-{tgt}, {vocab}, {manifest['dtype']}"]
    for split, c in manifest["splits"].items():
        lines.append(f"  {split:<5} {_counts_line(c, src, tgt)}")
        for name, counts in c.get("directions", {}).items():
            lines.append(f"    {name} {_counts_line(counts, *name.split('-'))}")
    return "\n".join(lines)


def _counts_line(c: dict[str, Any], src: str, tgt: str) -> str:
    dropped = sum(c["dropped"].values())
    reasons = ", ".join(f"{r} {n}" for r, n in c["dropped"].items() if n)
    why = f" ({reasons})" if reasons else ""
    return (
        f"read {c['read']}, kept {c['kept']}, dropped {dropped}{why}; "
        f"tokens {src} {c['tokens']['src']}, {tgt} {c['tokens']['tgt']}"
    )
