"""Checkpoints: plain data written atomically, loaded with ``torch.load(weights_only=True)``.

A checkpoint is a dict::

    format            "mtkit-checkpoint"
    format_version    CHECKPOINT_VERSION
    mtkit_version     the writer's version string
    model_config      ModelConfig as a dict
    train_config      TrainConfig as a dict (the resolved config of the run)
    spm               {"src": bytes, "tgt": bytes}: the sentencepiece models themselves
    model             the model's state dict
    vocab             optional: {"src": [piece of id 0, 1, ...], "tgt": [...]}, an imported
                      vocabulary whose ids are not the sentencepiece ids (``mtkit import``)
    special_ids       optional, with ``vocab``: {"pad", "unk", "bos", "eos"}, its special ids
                      (``bos``: the first decoder input)
    ...               training state (optimizer, scheduler, RNG, data position) when saved by
                      `mtkit train`; `mtkit average` and exports keep only the above

so `mtkit translate -m CKPT` needs nothing else. Loading never unpickles code: anything beyond
tensors and plain containers is refused with a clear error. Without ``vocab`` (every checkpoint
mtkit trains from its own sentencepiece models, and every older one) ids are the sentencepiece
ids with mtkit's fixed special ids (:mod:`mtkit.data.tokenizer`).
"""

from __future__ import annotations

import pickle
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mtkit import __version__
from mtkit.config import ModelConfig, from_dict
from mtkit.data.tokenizer import DEFAULT_SPECIAL_IDS, SpecialIds, Tokenizer
from mtkit.errors import MtkitError
from mtkit.model.transformer import Transformer, build_model
from mtkit.staging import staged_file

FORMAT = "mtkit-checkpoint"
CHECKPOINT_VERSION = 1


def save_checkpoint(payload: dict[str, Any], path: str | Path) -> None:
    """Write ``payload`` whole or not at all (:func:`mtkit.staging.staged_file`)."""
    payload = {"format": FORMAT, "format_version": CHECKPOINT_VERSION,
               "mtkit_version": __version__, **payload}  # fmt: skip
    try:
        with staged_file(path) as handle:
            torch.save(payload, handle)
    except OSError as err:
        raise MtkitError(f"{path}: could not write checkpoint ({err.strerror or err})") from None


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load and validate a checkpoint without executing any code from it."""
    path = Path(path)
    if not path.exists():
        raise MtkitError(f"{path}: no such checkpoint")
    if path.is_dir():
        raise MtkitError(f"{path}: is a directory, not a checkpoint")
    if path.stat().st_size == 0:
        raise MtkitError(f"{path}: empty file, not a checkpoint")
    try:
        with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": we explain below
            warnings.simplefilter("ignore")
            ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        raise MtkitError(f"{path}: {unpickling_problem(str(err))}") from None
    except Exception as err:  # torch raises many types for truncated or foreign files
        raise MtkitError(
            f"{path}: unreadable checkpoint (truncated or corrupt: {_first_sentence(err)})"
        ) from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise MtkitError(f"{path}: not an mtkit checkpoint")
    if ckpt.get("format_version") != CHECKPOINT_VERSION:
        raise MtkitError(
            f"{path}: checkpoint format {ckpt.get('format_version')!r} (mtkit "
            f"{ckpt.get('mtkit_version', '?')}); this mtkit {__version__} reads "
            f"format {CHECKPOINT_VERSION}"
        )
    for key in ("model_config", "model", "spm"):
        if key not in ckpt:
            raise MtkitError(f"{path}: checkpoint lacks '{key}'")
    return ckpt


def unpickling_problem(text: str) -> str:
    """What ``torch.load(weights_only=True)`` refused, in a few words."""
    called = re.search(r"GLOBAL ([\w.]+)", text)
    if called:  # a pickle that imports something: exactly what a crafted file does to run code
        return (
            f"refused: loading it would call {called.group(1)} (a checkpoint holds only tensors "
            "and plain data; not an mtkit checkpoint, or crafted to run code)"
        )
    detail = re.search(r"WeightsUnpickler error:\s*(.+)", text)
    reason = detail.group(1).strip() if detail else "unsupported pickle content"
    return f"refused: not a checkpoint of tensors and plain data ({reason})"


def _first_sentence(err: Exception) -> str:
    """The first line (and sentence) of a library's error, or its type when it has no text."""
    text = str(err).strip()
    if not text:
        return type(err).__name__
    return text.splitlines()[0].split(". ")[0].rstrip(".")


@dataclass
class LoadedModel:
    """A model ready for inference with the tokenizers it was trained with."""

    model: Transformer
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    config: ModelConfig
    checkpoint_path: str


def special_ids(ckpt: dict[str, Any], where: str = "checkpoint") -> SpecialIds:
    """The checkpoint's special ids: its ``special_ids``, else mtkit's fixed ones."""
    if "special_ids" not in ckpt:
        return DEFAULT_SPECIAL_IDS
    if not ckpt.get("vocab"):
        raise MtkitError(f"{where}: special_ids without a vocab")
    return SpecialIds.from_dict(ckpt["special_ids"], f"{where}: special_ids")


def tokenizers(ckpt: dict[str, Any], where: str = "checkpoint") -> tuple[Tokenizer, Tokenizer]:
    """(source, target) tokenizers: the sentencepiece models, and the vocabulary if any."""
    spm, vocab, ids = ckpt["spm"], ckpt.get("vocab") or {}, special_ids(ckpt, where)
    if vocab and not (isinstance(vocab, dict) and all(
            isinstance(vocab.get(side), list) for side in ("src", "tgt"))):  # fmt: skip
        raise MtkitError(f"{where}: vocab must hold 'src' and 'tgt' lists of pieces")
    return (
        Tokenizer(spm["src"], f"{where}: source spm", vocab.get("src"), ids),
        Tokenizer(spm["tgt"], f"{where}: target spm", vocab.get("tgt"), ids),
    )


def vocab_fields(src: Tokenizer, tgt: Tokenizer) -> dict[str, Any]:
    """The checkpoint fields that carry an imported vocabulary; {} for mtkit's own ids."""
    if src.vocab is None and tgt.vocab is None:
        return {}
    return {"vocab": {"src": src.pieces_by_id(), "tgt": tgt.pieces_by_id()},
            "special_ids": tgt.specials.to_dict()}  # fmt: skip


def model_from_checkpoint(ckpt: dict[str, Any], where: str = "checkpoint") -> Transformer:
    cfg = from_dict(ModelConfig, ckpt["model_config"], where=f"{where}: model_config")
    model = build_model(cfg, special_ids(ckpt, where))
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as err:  # one problem per line after a heading: name the first
        problems = [line.strip() for line in str(err).splitlines()[1:] if line.strip()]
        first = problems[0].rstrip(".") if problems else _first_sentence(err)
        more = f"; {len(problems) - 1} more" if len(problems) > 1 else ""
        raise MtkitError(f"{where}: weights do not fit the model config ({first}{more})") from None
    return model


def load_for_inference(path: str | Path, device: str | torch.device = "cpu") -> LoadedModel:
    """Load a checkpoint's model (in eval mode, on ``device``) and its sentencepiece models."""
    ckpt = load_checkpoint(path)
    model = model_from_checkpoint(ckpt, str(path)).to(device).eval()
    src, tgt = tokenizers(ckpt, str(path))
    model.tag_ids = src.tag_ids  # a leading tag does not count toward max_len_a (decoding)
    return LoadedModel(
        model=model,
        src_tokenizer=src,
        tgt_tokenizer=tgt,
        config=model.cfg,
        checkpoint_path=str(path),
    )
