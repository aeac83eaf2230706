"""The :class:`Checkpoint` type: every field a checkpoint file holds, read and written in one place.

On disk (format_version 1, a dict of tensors and plain containers)::

    model_config      ModelConfig as a dict
    model             the model's state dict
    spm               {"src": bytes, "tgt": bytes}: the sentencepiece models themselves
    vocab             optional: {"src": [piece of id 0, 1, ...], "tgt": [...]}, an imported
                      vocabulary whose ids are not the sentencepiece ids (``mtkit import``)
    special_ids       optional, with ``vocab``: {"pad", "unk", "bos", "eos"}, its special ids
                      (``bos``: the first decoder input)
    src_lang/tgt_lang optional: the language codes (:class:`mtkit.languages.Languages`)
    tag_ids           optional: ids of the source vocabulary's target-language tags
    source_pieces     optional: the longest source of the training data, in pieces (EOS not
                      counted): longer lines are cut to it before decoding
    sentence_style    optional: {"openers": [...], "final": ".", "length": 23, "edges":
                      {"ends": {word: share}, "starts": {...}}}, how the training sources'
                      sentences start and end, and their typical length in pieces
                      (:mod:`mtkit.data.sentence_style`)
    source_words      optional: the training sources' words, most frequent first
                      (:mod:`mtkit.data.source_words`)
    train_config      TrainConfig as a dict (the resolved config of the run); {} when none
    averaged_from     optional: the files `mtkit average` averaged
    imported_from     optional: {"format": "hf", "path": ...} of `mtkit import`
    optimizer, scheduler, scaler, rng, state, update, epoch
                      the training state (:class:`ResumeState`) of `mtkit train`'s checkpoints

Without ``vocab`` ids are the sentencepiece ids with mtkit's fixed special ids
(:mod:`mtkit.data.tokenizer`). Files written before a field existed load with its fallback:
without ``tag_ids`` the source vocabulary's tags (:attr:`Tokenizer.tag_ids`); without language
codes those of ``train_config`` or, while it is still there, the ``manifest.json`` of the
dataset it was trained on (``train_config.data``), else None.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from mtkit.checkpoint.storage import first_sentence, load_checkpoint, save_checkpoint
from mtkit.config import ModelConfig, TrainConfig, from_dict
from mtkit.data.sentence_style import SentenceStyle
from mtkit.data.source_words import SourceWords
from mtkit.data.tokenizer import DEFAULT_SPECIAL_IDS, SpecialIds, Tokenizer
from mtkit.errors import MtkitError
from mtkit.languages import Languages
from mtkit.model.transformer import Transformer, build_model


@dataclass(eq=False)  # state dicts hold tensors: compare their fields
class ResumeState:
    """What `mtkit train` needs besides the model to continue a run exactly
    (:mod:`mtkit.training.state`)."""

    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    rng: list[dict[str, Any]]  # one entry per rank: torch CPU, CUDA and Python random states
    state: dict[str, Any]  # mtkit.training.state.TrainState as a dict
    scaler: dict[str, Any] = field(default_factory=dict)  # fp16's gradient scaler ({}: unused)

    KEYS = ("optimizer", "scheduler", "rng", "state")  # the scaler is optional

    @property
    def update(self) -> int:
        return int(self.state.get("update", 0))

    @property
    def epoch(self) -> int:
        return int(self.state.get("epoch", 1))

    def to_payload(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer,
            "scheduler": self.scheduler,
            "scaler": self.scaler,
            "rng": self.rng,
            "state": self.state,
            "update": self.update,
            "epoch": self.epoch,
        }


@dataclass(eq=False)
class Checkpoint:
    """A model with everything needed to use it (see the module doc for the file)."""

    model_config: ModelConfig
    model: dict[str, torch.Tensor]  # the state dict
    spm: dict[str, bytes]  # {"src": bytes, "tgt": bytes}
    vocab: dict[str, list[str]] | None = None  # an imported vocabulary, with its special ids
    special_ids: SpecialIds | None = None
    languages: Languages | None = None
    tag_ids: tuple[int, ...] = ()  # the target-language tags of a multilingual model
    source_pieces: int | None = None  # the longest training source (None: not recorded)
    sentence_style: SentenceStyle = field(default_factory=SentenceStyle)  # empty: not recorded
    source_words: SourceWords = field(default_factory=SourceWords)  # empty: not recorded
    train_config: dict[str, Any] = field(default_factory=dict)  # TrainConfig as a dict
    averaged_from: list[str] | None = None
    imported_from: dict[str, Any] | None = None
    resume: ResumeState | None = None  # training checkpoints only
    where: str = field(default="checkpoint", compare=False)  # the file, for messages

    @classmethod
    def of(cls, model: Transformer, src: Tokenizer, tgt: Tokenizer, **fields: Any) -> Checkpoint:
        """The checkpoint of ``model`` with its tokenizers (their vocabularies and tags)."""
        return cls(
            model_config=model.cfg,
            model=model.state_dict(),
            **vocabularies(src, tgt),
            tag_ids=src.tag_ids,
            **fields,
        )

    # -- the file ------------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Write the checkpoint whole or not at all."""
        save_checkpoint(self.to_payload(), path)

    @classmethod
    def load(cls, path: str | Path, map_location: str | torch.device = "cpu") -> Checkpoint:
        """Load and validate ``path``; one-line errors name the file and the field."""
        return cls.from_payload(load_checkpoint(path, map_location), str(path))

    def to_payload(self) -> dict[str, Any]:
        """The file's dict (tensors and plain containers; unset optional fields left out)."""
        optional = {
            "vocab": self.vocab,
            "special_ids": self.special_ids.to_dict() if self.special_ids else None,
            **(self.languages.to_dict() if self.languages else {}),
            "tag_ids": list(self.tag_ids),
            "source_pieces": self.source_pieces,
            "sentence_style": self.sentence_style.to_dict() if self.sentence_style else None,
            "source_words": self.source_words.to_list() if self.source_words else None,
            "averaged_from": self.averaged_from,
            "imported_from": self.imported_from,
            **(self.resume.to_payload() if self.resume else {}),
        }
        return {
            "model_config": asdict(self.model_config),
            "train_config": self.train_config,
            "spm": self.spm,
            "model": self.model,
            **{k: v for k, v in optional.items() if v is not None},
        }

    @classmethod
    def from_payload(cls, payload: dict[str, Any], where: str = "checkpoint") -> Checkpoint:
        """The checkpoint of a loaded file's dict (:func:`load_checkpoint` checked its envelope)."""
        spm = payload["spm"]
        sides = ("src", "tgt")
        if not (isinstance(spm, dict) and all(isinstance(spm.get(s), bytes) for s in sides)):
            raise MtkitError(f"{where}: spm must hold the 'src' and 'tgt' sentencepiece models")
        train_config = payload.get("train_config") or {}
        if not isinstance(train_config, dict):
            raise MtkitError(f"{where}: train_config must be a mapping")
        ckpt = cls(
            model_config=from_dict(ModelConfig, payload["model_config"], f"{where}: model_config"),
            model=payload["model"],
            spm=spm,
            vocab=_vocab(payload, where),
            special_ids=_special_ids(payload, where),
            train_config=train_config,
            averaged_from=payload.get("averaged_from"),
            imported_from=payload.get("imported_from"),
            resume=_resume(payload),
            source_pieces=_source_pieces(payload, where),
            sentence_style=SentenceStyle.from_dict(
                payload.get("sentence_style", {}), f"{where}: sentence_style"
            ),
            source_words=SourceWords.from_list(
                payload.get("source_words", []), f"{where}: source_words"
            ),
            where=where,
        )
        ckpt.languages = Languages.from_dict(payload) or _trained_languages(train_config)
        ckpt.tag_ids = (
            _tag_ids(payload, where) if "tag_ids" in payload else (ckpt.tokenizers()[0].tag_ids)
        )
        return ckpt

    # -- what it holds -------------------------------------------------------------------------

    def tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        """(source, target) tokenizers: the sentencepiece models, and the vocabulary if any."""
        vocab, ids = self.vocab or {}, self.special_ids or DEFAULT_SPECIAL_IDS
        return (
            Tokenizer(self.spm["src"], f"{self.where}: source spm", vocab.get("src"), ids),
            Tokenizer(self.spm["tgt"], f"{self.where}: target spm", vocab.get("tgt"), ids),
        )

    def build_model(self) -> Transformer:
        """The model with the checkpoint's weights, special ids and tags (in train mode)."""
        ids = self.special_ids or DEFAULT_SPECIAL_IDS
        model = build_model(self.model_config, ids, self.tag_ids)
        try:
            model.load_state_dict(self.model)
        except RuntimeError as err:  # one problem per line after a heading: name the first
            problems = [line.strip() for line in str(err).splitlines()[1:] if line.strip()]
            first = problems[0].rstrip(".") if problems else first_sentence(err)
            more = f"; {len(problems) - 1} more" if len(problems) > 1 else ""
            raise MtkitError(
                f"{self.where}: weights do not fit the model config ({first}{more})"
            ) from None
        return model

    def training_config(self) -> TrainConfig:
        """The run's resolved TrainConfig (resuming needs it; translating does not)."""
        return from_dict(TrainConfig, self.train_config, where=f"{self.where}: train_config")

    def has_vocabularies(self, src: Tokenizer, tgt: Tokenizer) -> bool:
        """True when ``src`` and ``tgt`` are the checkpoint's tokenizers (models and ids)."""
        mine = {"spm": self.spm, "vocab": self.vocab, "special_ids": self.special_ids}
        return mine == vocabularies(src, tgt)


def vocabularies(src: Tokenizer, tgt: Tokenizer) -> dict[str, Any]:
    """The checkpoint fields of tokenizers: their ``spm``, and ``vocab`` and ``special_ids``
    for an imported vocabulary (None for mtkit's own ids)."""
    spm = {"src": src.proto, "tgt": tgt.proto}
    if src.vocab is None and tgt.vocab is None:
        return {"spm": spm, "vocab": None, "special_ids": None}
    vocab = {"src": src.pieces_by_id(), "tgt": tgt.pieces_by_id()}
    return {"spm": spm, "vocab": vocab, "special_ids": tgt.specials}


def _vocab(payload: dict[str, Any], where: str) -> dict[str, list[str]] | None:
    vocab = payload.get("vocab") or None
    if vocab is not None and not (
        isinstance(vocab, dict)
        and all(isinstance(vocab.get(side), list) for side in ("src", "tgt"))
    ):
        raise MtkitError(f"{where}: vocab must hold 'src' and 'tgt' lists of pieces")
    return vocab


def _special_ids(payload: dict[str, Any], where: str) -> SpecialIds | None:
    if "special_ids" not in payload:
        return None
    if not payload.get("vocab"):
        raise MtkitError(f"{where}: special_ids without a vocab")
    return SpecialIds.from_dict(payload["special_ids"], f"{where}: special_ids")


def _tag_ids(payload: dict[str, Any], where: str) -> tuple[int, ...]:
    tags = payload["tag_ids"]
    if not (isinstance(tags, list | tuple) and all(isinstance(t, int) for t in tags)):
        raise MtkitError(f"{where}: tag_ids must be a list of ids")
    return tuple(tags)


def _source_pieces(payload: dict[str, Any], where: str) -> int | None:
    value = payload.get("source_pieces")
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise MtkitError(f"{where}: source_pieces must be a positive integer, got {value!r}")
    return value


def _resume(payload: dict[str, Any]) -> ResumeState | None:
    if not all(key in payload for key in ResumeState.KEYS):
        return None
    fields = {f.name for f in dataclasses.fields(ResumeState)}
    return ResumeState(**{k: v for k, v in payload.items() if k in fields and v is not None})


def _trained_languages(train_config: dict[str, Any]) -> Languages | None:
    """A file without language codes: its train_config's, else its dataset's manifest.json."""
    found = Languages.from_dict(train_config)
    if found is None and train_config.get("data"):
        manifest = Path(str(train_config["data"])) / "manifest.json"
        try:
            found = Languages.from_dict(json.loads(manifest.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            found = None
    return found
