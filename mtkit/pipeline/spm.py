"""`mtkit spm train`: sentencepiece BPE models from text files or from a parallel corpus.

With text files, one model ``PREFIX.model`` learns from all their lines. With a corpus (any
source `mtkit prepare` reads: a prefix, a TSV file, a HF dataset) it is one joint model
``PREFIX.model`` over both languages, or one per language: ``PREFIX.SRC.model`` and
``PREFIX.TGT.model``. With several corpora (``--pair SRC-TGT=SOURCE``, repeated) it is one
joint model over every side of every corpus, holding each target language's tag ``>>xx<<``
as a user-defined symbol (:mod:`mtkit.data.tags`). Sentences stream into sentencepiece
(which samples ``input_sentence_size`` of them when that is > 0); every model gets a ``.vocab``
listing, and both files are written to a temporary name and renamed. ``byte_fallback`` adds the
256 byte pieces (:mod:`mtkit.data.tokenizer`), which leaves no character UNK.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import chain
from pathlib import Path
from typing import Any

from mtkit.config import SpmConfig
from mtkit.data.cleaning import normalize
from mtkit.data.corpus import Source, open_source, read_lines
from mtkit.data.tags import parse_pairs, tag
from mtkit.data.tokenizer import (
    BYTE_PIECES,
    MAX_SENTENCE_BYTES,
    SPECIAL_IDS,
    Tokenizer,
    train_spm,
)
from mtkit.errors import MtkitError
from mtkit.pipeline.textio import atomic_write_bytes, atomic_write_text


class _Guarded:
    """Iterates sentences for sentencepiece, which would turn an error into an opaque one.

    An exception stops the iteration and is kept in ``error`` for the caller to raise.
    """

    def __init__(self, sentences: Iterator[str]) -> None:
        self.sentences, self.count = sentences, 0
        self.too_long = 0  # sentences sentencepiece will skip (over MAX_SENTENCE_BYTES)
        self.error: BaseException | None = None

    def __iter__(self) -> _Guarded:
        return self

    def __next__(self) -> str:
        try:
            sentence = next(self.sentences)
        except StopIteration:
            raise
        except Exception as err:  # re-raised by train_one once sentencepiece returns
            self.error = err
            raise StopIteration from None
        self.count += 1
        if len(sentence) * 4 > MAX_SENTENCE_BYTES and len(sentence.encode()) > MAX_SENTENCE_BYTES:
            self.too_long += 1
        return sentence


def _clean(lines: Iterator[str]) -> Iterator[str]:
    """Stripped, non-empty lines."""
    for line in lines:
        text = normalize(line)
        if text:
            yield text


def file_sentences(paths: list[str]) -> Iterator[str]:
    for path in paths:
        if not Path(path).is_file():
            raise MtkitError(
                f"{path}: {'is a directory' if Path(path).is_dir() else 'no such file'}"
            )
    for path in paths:
        yield from _clean(read_lines(path))


def corpus_sentences(source: Source, sides: tuple[str, ...]) -> Iterator[str]:
    return _clean(source.sentences(sides))


def vocab_text(proto: bytes) -> str:
    """The ``.vocab`` listing sentencepiece writes: ``piece<TAB>score`` per id."""
    sp = Tokenizer(proto).sp
    return "".join(f"{sp.IdToPiece(i)}\t{sp.GetScore(i):g}\n" for i in range(sp.GetPieceSize()))


def train_one(
    cfg: SpmConfig, prefix: str, sentences: Iterator[str], symbols: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Train one model on ``sentences`` (and user-defined ``symbols``); write PREFIX.model
    and PREFIX.vocab."""
    guarded = _Guarded(sentences)
    first = next(guarded, None)
    if guarded.error is not None:
        raise guarded.error
    if first is None:
        raise MtkitError(f"{prefix}: no text to train on (all inputs are empty)")
    try:
        proto = train_spm(
            chain([first], guarded),
            vocab_size=cfg.vocab_size,
            character_coverage=cfg.character_coverage,
            input_sentence_size=cfg.input_sentence_size,
            seed=cfg.seed,
            num_threads=cfg.num_threads,
            user_defined_symbols=symbols,
            byte_fallback=cfg.byte_fallback,
        )
    except MtkitError:
        if guarded.error is None and guarded.too_long == guarded.count:
            raise MtkitError(
                f"{', '.join(cfg.inputs) or cfg.train}: no text to train {prefix}.model on: every "
                f"sentence is longer than {MAX_SENTENCE_BYTES} bytes, which sentencepiece skips"
            ) from None
        if guarded.error is None:
            raise
    if guarded.error is not None:  # the real cause of a failure, or input cut short
        raise guarded.error
    model, vocab = Path(f"{prefix}.model"), Path(f"{prefix}.vocab")
    atomic_write_text(vocab, vocab_text(proto))
    atomic_write_bytes(model, proto)
    tok = Tokenizer(proto, name=str(model))
    return {
        "model": str(model),
        "vocab": str(vocab),
        "vocab_size": len(tok),
        "sentences": guarded.count,
        "sha256": tok.sha256,
        "tags": tok.tags,
        "byte_fallback": tok.byte_fallback,
    }


Plan = list[tuple[str, Callable[[], Iterator[str]], tuple[str, ...]]]


def plan_pairs(cfg: SpmConfig) -> Plan:
    """One joint model over every corpus of ``--pair``, with the target languages' tags."""
    if cfg.inputs or cfg.train:
        raise MtkitError("give --pair corpora, or text FILES or --train, not both")
    if not cfg.joint:
        raise MtkitError("--pair trains one joint model: --separate is not available with it")
    directions = parse_pairs(cfg.pairs)
    sources = [
        open_source(d.source, d.src, d.tgt, "train", cfg.format, cfg.hf_config) for d in directions
    ]
    tags = tuple(dict.fromkeys(tag(d.tgt) for d in directions))

    def sentences() -> Iterator[str]:
        for source in sources:
            yield from corpus_sentences(source, ("src", "tgt"))

    return [(cfg.model_prefix, sentences, tags)]


def plan(cfg: SpmConfig) -> Plan:
    """The models to train: (prefix, a function returning its sentences, its tags)."""
    if cfg.pairs:
        return plan_pairs(cfg)
    if cfg.inputs and cfg.train:
        raise MtkitError("give text FILES or a corpus (--train/--train-prefix), not both")
    if cfg.inputs:
        return [(cfg.model_prefix, lambda: file_sentences(cfg.inputs), ())]
    if not cfg.train:
        raise MtkitError("nothing to train on: give text FILES, --train/--train-prefix or --pair")
    if not cfg.src_lang or not cfg.tgt_lang or cfg.src_lang == cfg.tgt_lang:
        raise MtkitError("a corpus needs two different languages: --src-lang and --tgt-lang")
    source = open_source(cfg.train, cfg.src_lang, cfg.tgt_lang, "train", cfg.format, cfg.hf_config)
    if cfg.joint:
        return [(cfg.model_prefix, lambda: corpus_sentences(source, ("src", "tgt")), ())]
    return [
        (f"{cfg.model_prefix}.{lang}", lambda side=side: corpus_sentences(source, (side,)), ())
        for side, lang in (("src", cfg.src_lang), ("tgt", cfg.tgt_lang))
    ]


def train_models(cfg: SpmConfig) -> list[dict[str, Any]]:
    """Train the model(s) ``cfg`` asks for; return one description per model written."""
    if cfg.vocab_size < 5:  # 4 special pieces + at least one more
        raise MtkitError(f"--vocab-size must be at least 5, got {cfg.vocab_size}")
    if not 0 < cfg.character_coverage <= 1:
        raise MtkitError(f"--character-coverage must be in (0, 1], got {cfg.character_coverage}")
    if cfg.input_sentence_size < 0 or 0 < cfg.input_sentence_size <= 100:
        raise MtkitError(  # sentencepiece's own lower bound
            f"--input-sentence-size must be 0 (every sentence) or > 100, "
            f"got {cfg.input_sentence_size}"
        )
    plans = plan(cfg)
    for _, _, tags in plans:
        check_byte_room(cfg, len(tags))
    return [train_one(cfg, prefix, get(), tags) for prefix, get, tags in plans]


def check_byte_room(cfg: SpmConfig, tags: int) -> None:
    """``--byte-fallback`` puts 256 byte pieces beside the special ones and the tags: refuse a
    vocabulary with no room left for the characters and merges."""
    fixed = len(SPECIAL_IDS) + tags + BYTE_PIECES
    if not cfg.byte_fallback or cfg.vocab_size > fixed:
        return
    held = [f"{len(SPECIAL_IDS)} special pieces"] + [f"{tags} tag" + "s" * (tags > 1)] * (tags > 0)
    raise MtkitError(
        f"--byte-fallback needs --vocab-size above {fixed} ({', '.join(held)} and {BYTE_PIECES} "
        f"byte pieces), got {cfg.vocab_size}"
    )


def summary(results: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"wrote {r['model']} and {r['vocab']}: {r['vocab_size']} pieces"
        + (f" ({BYTE_PIECES} of them bytes: byte fallback)" if r["byte_fallback"] else "")
        + f" from {r['sentences']} sentences"
        + (f", tags {' '.join(r['tags'])}" if r["tags"] else "")
        for r in results
    )
