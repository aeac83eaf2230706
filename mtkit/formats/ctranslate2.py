"""The directory `mtkit export --format ctranslate2` writes and `--engine ctranslate2` reads.

CTranslate2's own files (``model.bin``, ``config.json``, its vocabularies) sit beside
``source.spm`` and ``target.spm`` and ``mtkit.json``::

    format              "mtkit-ctranslate2"
    mtkit_version, ctranslate2_version, checkpoint, quantization
    max_positions       the model's position limit (inputs are cut to it)
    src_lang, tgt_lang  optional: the language codes (:class:`mtkit.languages.Languages`)
    source_vocab, source_special_ids, target_vocab, target_special_ids
                        optional: an imported vocabulary whose ids are not the spm's
    vmap, shortlist     optional: ``vmap.txt``, the vocabulary map written from a shortlist
                        (`mtkit export --shortlist`), and what that shortlist was; the engine
                        then decodes with ``use_vmap``

``vmap.txt`` is CTranslate2's vocabulary map (its ``VocabularyMap``): one line per source piece,
``PIECE<TAB>TARGET TARGET ...``, and one line with an empty key whose targets are candidates for
every batch (the frequent pieces); CTranslate2 adds UNK, BOS and EOS itself.

This module imports neither torch nor the model: the engine runs without them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mtkit import __version__
from mtkit.data.shortlist import Shortlist
from mtkit.data.tokenizer import SpecialIds, Tokenizer
from mtkit.errors import MtkitError
from mtkit.extras import require
from mtkit.languages import Languages

METADATA = "mtkit.json"
FORMAT = "mtkit-ctranslate2"
SIDES = (("source", "source.spm"), ("target", "target.spm"))
QUANTIZATIONS = ("float32", "int8_float32", "int8", "float16")  # the weight types one can write
VMAP = "vmap.txt"


def ctranslate2_module() -> Any:
    return require("ctranslate2", "ct2", "CTranslate2 export and decoding")


def suppressed(tgt: Tokenizer) -> list[list[str]]:
    """The pieces mtkit never generates (PAD and the decoder's start token), for CTranslate2."""
    ids = tgt.specials
    return [[tgt.id_to_piece(i)] for i in sorted({ids.pad, ids.bos})]


def vocabularies(src: Tokenizer, tgt: Tokenizer) -> dict[str, Any]:
    """What mtkit.json keeps of an imported vocabulary (ids that are not the spm's), so that
    the engine encodes and decodes with it; nothing for mtkit's own models."""
    out: dict[str, Any] = {}
    for side, tok in (("source", src), ("target", tgt)):
        if tok.vocab is not None:
            out[f"{side}_vocab"] = list(tok.vocab)
            out[f"{side}_special_ids"] = tok.specials.to_dict()
    return out


def vmap_text(shortlist: Shortlist, src: Tokenizer, tgt: Tokenizer) -> str:
    """``shortlist`` as CTranslate2's vocabulary map over the pieces of ``src`` and ``tgt``."""
    sources, targets = src.pieces_by_id(), tgt.pieces_by_id()
    lines = ["\t" + " ".join(targets[t] for t in shortlist.frequent)]
    lines += [
        f"{sources[s]}\t" + " ".join(targets[t] for t in row)
        for s, row in enumerate(shortlist.candidates)
        if row
    ]
    return "".join(line + "\n" for line in lines)


def write_sidecar(
    out: Path,
    src: Tokenizer,
    tgt: Tokenizer,
    max_positions: int,
    languages: Languages | None,
    **provenance: Any,
) -> None:
    """``source.spm``, ``target.spm`` and ``mtkit.json`` into the directory ``out``."""
    (out / "source.spm").write_bytes(src.proto)
    (out / "target.spm").write_bytes(tgt.proto)
    meta = {
        "format": FORMAT,
        "mtkit_version": __version__,
        **provenance,
        "max_positions": max_positions,
        **(languages.to_dict() if languages else {}),
        **vocabularies(src, tgt),
    }
    (out / METADATA).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


def read_metadata(model_dir: Path) -> dict[str, Any]:
    """``mtkit.json`` of an exported directory ({} where there is none), after checking that
    the directory holds a CTranslate2 model and both sentencepiece models."""
    if not model_dir.is_dir():
        raise MtkitError(f"{model_dir}: no such CTranslate2 model directory (mtkit export)")
    for _, name in SIDES:
        if not (model_dir / name).is_file():
            raise MtkitError(f"{model_dir}: no {name} (export it with `mtkit export`)")
    if not (model_dir / "model.bin").is_file():
        raise MtkitError(f"{model_dir}: not a CTranslate2 model directory (no model.bin)")
    path = model_dir / METADATA
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise MtkitError(f"{path}: unreadable ({err})") from None
    if not isinstance(meta, dict):
        raise MtkitError(f"{path}: not a JSON object")
    return meta


def read_tokenizer(model_dir: Path, side: str, meta: dict[str, Any]) -> Tokenizer:
    """``source.spm``/``target.spm``, with the imported vocabulary mtkit.json names, if any."""
    path = model_dir / f"{side}.spm"
    vocab = meta.get(f"{side}_vocab")
    if vocab is None:
        return Tokenizer.from_file(path)
    specials = SpecialIds.from_dict(meta.get(f"{side}_special_ids"), f"{model_dir}: {METADATA}")
    return Tokenizer(path.read_bytes(), str(path), vocab, specials)


def export_languages(meta: dict[str, Any]) -> Languages | None:
    """The language codes ``mtkit.json`` names; for an export written before it named them,
    those of the checkpoint it was exported from, if that file is still there."""
    found = Languages.from_dict(meta)
    source = Path(str(meta.get("checkpoint") or ""))
    if found is None and meta.get("checkpoint") and source.is_file():
        from mtkit.checkpoint import Checkpoint  # older exports only: torch, imported lazily

        return Checkpoint.load(source).languages
    return found
