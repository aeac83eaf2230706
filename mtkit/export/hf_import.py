"""Import a Hugging Face MarianMTModel directory (an OPUS-MT model) as an mtkit checkpoint.

The reverse of :mod:`mtkit.export.hf`, with the same correspondence, read against
``modeling_marian.py`` and ``tokenization_marian.py`` (transformers 5.x):

==========================================  ===================================================
MarianMTModel directory                     mtkit checkpoint
==========================================  ===================================================
``vocab.json`` (``target_vocab.json``)      ``vocab``: pieces by id, as Marian numbers them (not
                                            the sentencepiece ids); unknown pieces -> UNK
config ``pad/eos_token_id``, tokenizer      ``special_ids``: PAD (OPUS-MT: the last id), EOS (0),
``unk_token``, ``decoder_start_token_id``   UNK (1), ``bos`` = the start token (OPUS-MT: PAD)
``activation_function`` relu/gelu/swish     ``ffn_activation`` relu / gelu / silu
``final_logits_bias``                       ``output_bias`` (only when not all zero)
``scale_embedding``                         ``scale_embedding``
sinusoids, sines then cosines, from 0       ``positions: sinusoidal`` (the same table; a stored
                                            ``embed_positions`` is checked against it)
``share_encoder_decoder_embeddings``        ``share_all_embeddings``
``tie_word_embeddings`` / ``lm_head``       ``tie_output`` / ``output``
``q_proj``, ``k_proj``, ``v_proj``          fused ``qkv`` (self-attention), ``q`` + ``kv`` (cross)
``max_position_embeddings``                 ``max_positions``
==========================================  ===================================================

Weights are read as data: ``model.safetensors``, or ``pytorch_model.bin`` with
``torch.load(weights_only=True)``, so a pickle that would run code is refused and never runs.
Anything the checkpoint cannot hold exactly (an unknown activation, ``add_bias_logits``,
``normalize_before``, layer norms on the embeddings, different widths per side, a weight with no
place in the model, ...) is refused in one line naming it, before anything is written.
"""

from __future__ import annotations

import json
import pickle
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import Tensor

from mtkit.checkpoint import Checkpoint, unpickling_problem
from mtkit.config import ModelConfig
from mtkit.data.tokenizer import DEFAULT_SPECIAL_IDS, SpecialIds, Tokenizer
from mtkit.errors import MtkitError
from mtkit.export import require
from mtkit.export.hf import MARIAN_ATTENTIONS, MARIAN_NORMS, MARIAN_PROJECTIONS
from mtkit.languages import Languages
from mtkit.model.positions import sinusoidal_positions
from mtkit.model.transformer import Transformer, build_model
from mtkit.model.weights import (
    AttentionWeights,
    DecoderLayerWeights,
    EncoderLayerWeights,
    FeedForwardWeights,
    LinearWeights,
    ModelWeights,
    NormWeights,
    state_dict_from,
)

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu"}
# config keys of older Marian/BART configs that transformers' MarianMTModel ignores: a value
# other than the one it assumes describes a model it does not compute, so it is refused
ASSUMED = {
    "normalize_before": False,
    "add_final_layer_norm": False,
    "normalize_embedding": False,
    "layernorm_embedding": False,
    "add_bias_logits": False,
    "static_position_embeddings": True,
    "is_encoder_decoder": True,
}
Layer = TypeVar("Layer", EncoderLayerWeights, DecoderLayerWeights)
POSITION_ATOL = 1e-5  # a stored sinusoid table must be Marian's (and ours) to float32 rounding


@dataclass
class Imported:
    output: Path
    config: ModelConfig
    special_ids: SpecialIds
    joint_vocab: bool
    languages: Languages | None = None


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise MtkitError(f"{path.parent}: no {path.name} (not a MarianMTModel directory)")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise MtkitError(f"{path}: unreadable JSON ({err})") from None


def _refuse(key: str, value: Any, why: str) -> MtkitError:
    return MtkitError(f"config.json: {key}={json.dumps(value)} cannot be imported: {why}")


def model_config(config: dict[str, Any]) -> ModelConfig:
    """The ModelConfig of a MarianConfig (``config.json``), or a refusal naming the key."""
    if config.get("model_type") != "marian":
        raise _refuse("model_type", config.get("model_type"), "only MarianMTModel is imported")
    for key, assumed in ASSUMED.items():
        if key in config and config[key] != assumed:
            raise _refuse(
                key,
                config[key],
                f"transformers' MarianMTModel assumes "
                f"{json.dumps(assumed)} (it would compute another model)",
            )
    act = config.get("activation_function", "gelu")
    if act not in ACTIVATIONS:
        raise _refuse("activation_function", act, f"mtkit has {', '.join(ACTIVATIONS)}")
    for enc, dec in (
        ("encoder_attention_heads", "decoder_attention_heads"),
        ("encoder_ffn_dim", "decoder_ffn_dim"),
    ):
        if config.get(enc, 16) != config.get(dec, 16):
            raise _refuse(
                dec,
                config.get(dec),
                f"differs from {enc}={config.get(enc)}; mtkit has one width for both sides",
            )
    if config.get("d_model", 1024) % 2:
        raise _refuse("d_model", config["d_model"], "sinusoidal positions need an even width")
    vocab = config.get("vocab_size", 58101)
    shared = config.get("share_encoder_decoder_embeddings", True)
    tgt_vocab = vocab if shared else (config.get("decoder_vocab_size") or vocab)
    values = dict(
        src_vocab_size=vocab,
        tgt_vocab_size=tgt_vocab,
        d_model=config.get("d_model", 1024),
        ffn_dim=config.get("encoder_ffn_dim", 4096),
        heads=config.get("encoder_attention_heads", 16),
        encoder_layers=config.get("encoder_layers", 12),
        decoder_layers=config.get("decoder_layers", 12),
        dropout=float(config.get("dropout", 0.1)),
        attention_dropout=float(config.get("attention_dropout", 0.0)),
        activation_dropout=float(config.get("activation_dropout", 0.0)),
        tie_output=bool(config.get("tie_word_embeddings", True)),
        share_all_embeddings=shared,
        max_positions=config.get("max_position_embeddings", 1024),
        ffn_activation=ACTIVATIONS[act],
        scale_embedding=bool(config.get("scale_embedding", False)),
    )
    return ModelConfig(**values)


def _vocab_list(path: Path, size: int) -> list[str]:
    """vocab.json's {piece: id} as pieces by id; ids must be 0..size-1, each once."""
    table = _read_json(path)
    if not isinstance(table, dict):
        raise MtkitError(f"{path}: expected a mapping of pieces to ids")
    pieces: list[str | None] = [None] * len(table)
    for piece, i in table.items():
        if not isinstance(i, int) or not 0 <= i < len(table) or pieces[i] is not None:
            raise MtkitError(f"{path}: ids are not 0..{len(table) - 1}, each once ({piece!r}: {i})")
        pieces[i] = piece
    if len(pieces) != size:
        raise MtkitError(f"{path}: {len(pieces)} pieces, but config.json's vocabulary has {size}")
    return pieces  # type: ignore[return-value]


def _special_ids(
    config: dict[str, Any], tok: dict[str, Any], vocabs: tuple[list[str], list[str]]
) -> SpecialIds:
    """PAD, EOS and the start token from config.json; UNK from the tokenizer; both must agree."""
    names = {
        "unk": tok.get("unk_token", "<unk>"),
        "eos": tok.get("eos_token", "</s>"),
        "pad": tok.get("pad_token", "<pad>"),
    }
    ids = {
        "pad": config.get("pad_token_id", 58100),
        "eos": config.get("eos_token_id", 0),
        "bos": config.get("decoder_start_token_id", 58100),
    }
    for key, value in (
        ("pad_token_id", ids["pad"]),
        ("eos_token_id", ids["eos"]),
        ("decoder_start_token_id", ids["bos"]),
    ):
        if not isinstance(value, int):
            raise _refuse(key, value, "mtkit needs one id")
    for side, vocab in zip(("vocab.json", "target_vocab.json"), vocabs, strict=True):
        found = {k: vocab.index(v) if v in vocab else None for k, v in names.items()}
        if found["unk"] is None:
            raise MtkitError(f"{side}: no unknown piece {names['unk']!r}")
        for key in ("pad", "eos"):
            if found[key] != ids[key]:
                raise MtkitError(
                    f"{side}: {names[key]!r} has id {found[key]}, config.json's "
                    f"{key}_token_id is {ids[key]}"
                )
        ids.setdefault("unk", found["unk"])
        if found["unk"] != ids["unk"]:
            raise MtkitError(f"{side}: {names['unk']!r} has another id than in vocab.json")
    return SpecialIds(**ids)


def read_weights(model_dir: Path) -> dict[str, Tensor]:
    """The tensors of model.safetensors or pytorch_model.bin, read as data only."""
    safetensors, binary = model_dir / "model.safetensors", model_dir / "pytorch_model.bin"
    if safetensors.is_file():
        loader = require("safetensors.torch", "hf", "importing a Hugging Face model")
        try:
            return dict(loader.load_file(str(safetensors), device="cpu"))
        except Exception as err:  # safetensors raises its own error types
            raise MtkitError(f"{safetensors}: unreadable ({str(err).splitlines()[0]})") from None
    if not binary.is_file():
        sharded = any(model_dir.glob("*.index.json"))
        what = "sharded weights are not supported" if sharded else "no weights"
        raise MtkitError(f"{model_dir}: {what} (model.safetensors or pytorch_model.bin)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            state = torch.load(binary, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise MtkitError(f"{binary}: {unpickling_problem(str(err))}") from None
    except Exception as err:
        raise MtkitError(f"{binary}: unreadable ({str(err).splitlines()[0]})") from None
    if not isinstance(state, dict) or not all(isinstance(v, Tensor) for v in state.values()):
        raise MtkitError(f"{binary}: not a state dict of tensors")
    return state


class _Weights:
    """MarianMTModel's tensors by name; every one must be used exactly once (or be a copy)."""

    def __init__(self, state: dict[str, Tensor]) -> None:
        self.state = {k: v.float() for k, v in state.items()}
        self.used: set[str] = set()

    def get(self, *names: str) -> Tensor:
        for name in names:
            if name in self.state:
                self.used.add(name)
                return self.state[name]
        raise MtkitError(f"weights: no {names[0]}")

    def linear(self, name: str) -> LinearWeights:
        return LinearWeights(self.get(f"{name}.weight"), self.get(f"{name}.bias"))

    def norm(self, name: str) -> NormWeights:
        return NormWeights(self.get(f"{name}.weight"), self.get(f"{name}.bias"))

    def rest(self) -> list[str]:
        return sorted(set(self.state) - self.used)


def _layer(w: _Weights, prefix: str, kind: type[Layer]) -> Layer:
    """Marian's layer ``prefix`` (``model.encoder.layers.3``) as the description ``kind``."""
    has = {field.name for field in fields(kind)}
    parts: dict[str, Any] = {}
    for field, name in MARIAN_ATTENTIONS.items():
        if field in has:
            roles = MARIAN_PROJECTIONS.items()
            projections = {role: w.linear(f"{prefix}.{name}.{proj}") for role, proj in roles}
            parts[field] = AttentionWeights(**projections)
    for field, name in MARIAN_NORMS.items():
        if field in has:
            parts[field] = w.norm(f"{prefix}.{name}")
    parts["ffn"] = FeedForwardWeights(w.linear(f"{prefix}.fc1"), w.linear(f"{prefix}.fc2"))
    return kind(**parts)


def mtkit_state_dict(state: dict[str, Tensor], cfg: ModelConfig) -> tuple[dict, ModelConfig]:
    """Our state dict from MarianMTModel's (and the config, with ``output_bias`` when the
    model has a nonzero ``final_logits_bias``); refuses weights left without a place."""
    w = _Weights(state)
    shared = "model.shared.weight"
    src = w.get("model.encoder.embed_tokens.weight", shared)
    tgt = src  # one table, under both names
    if not cfg.share_all_embeddings:
        tgt = w.get("model.decoder.embed_tokens.weight", shared)
    for name in (
        "model.shared.weight",
        "model.encoder.embed_tokens.weight",
        "model.decoder.embed_tokens.weight",
    ):
        if cfg.share_all_embeddings and name in w.state:  # copies of one shared table
            _same(w, name, src)
    output = None
    if not cfg.tie_output:
        output = w.get("lm_head.weight")
    elif "lm_head.weight" in w.state:  # tied: transformers replaces it by the embedding
        w.used.add("lm_head.weight")
    output_bias = None
    bias = w.get("final_logits_bias").reshape(-1) if "final_logits_bias" in w.state else None
    if bias is not None and bool(bias.any()):
        output_bias = bias
        cfg = ModelConfig(**{**asdict(cfg), "output_bias": True})
    for side in ("encoder", "decoder"):
        key = f"model.{side}.embed_positions.weight"
        if key in w.state:
            _check_positions(w.get(key), cfg)
    encoder = [
        _layer(w, f"model.encoder.layers.{i}", EncoderLayerWeights)
        for i in range(cfg.encoder_layers)
    ]
    decoder = [
        _layer(w, f"model.decoder.layers.{i}", DecoderLayerWeights)
        for i in range(cfg.decoder_layers)
    ]
    if w.rest():
        raise MtkitError(
            f"weights: {w.rest()[0]} has no place in mtkit's model "
            f"({len(w.rest())} such weights); not imported"
        )
    weights = ModelWeights(src, tgt, encoder, decoder, output=output, output_bias=output_bias)
    return state_dict_from(cfg, weights), cfg


def _same(w: _Weights, name: str, tensor: Tensor) -> None:
    if not torch.equal(w.get(name), tensor):
        raise MtkitError(
            f"weights: {name} differs from the shared embedding "
            "(share_encoder_decoder_embeddings is true)"
        )


def _check_positions(table: Tensor, cfg: ModelConfig) -> None:
    ours = sinusoidal_positions(cfg.max_positions, cfg.d_model)
    if table.shape != ours.shape or float((table - ours).abs().max()) > POSITION_ATOL:
        raise MtkitError(
            "weights: embed_positions is not Marian's sinusoidal table "
            "(sines then cosines); learned positions are not imported"
        )


def read_marian(model_dir: str | Path) -> tuple[Transformer, Tokenizer, Tokenizer]:
    """The model (eval mode) and the source/target tokenizers of a MarianMTModel directory."""
    d = Path(model_dir)
    if not d.is_dir():
        raise MtkitError(f"{d}: no such directory")
    config = _read_json(d / "config.json")
    cfg = model_config(config)
    tok = _read_json(d / "tokenizer_config.json") if (d / "tokenizer_config.json").is_file() else {}
    spm = {}
    for side in ("source", "target"):
        if not (d / f"{side}.spm").is_file():
            raise MtkitError(f"{d}: no {side}.spm (the sentencepiece model of the tokenizer)")
        spm[side] = (d / f"{side}.spm").read_bytes()
    src_file = d / "vocab.json" if (d / "vocab.json").is_file() else d / "source_vocab.json"
    if not src_file.is_file():
        raise MtkitError(f"{d}: no vocab.json (the tokenizer's pieces and ids)")
    separate = bool(tok.get("separate_vocabs", False))
    src_vocab = _vocab_list(src_file, cfg.src_vocab_size)
    tgt_vocab = src_vocab
    if separate:
        tgt_vocab = _vocab_list(d / "target_vocab.json", cfg.tgt_vocab_size)
    elif cfg.tgt_vocab_size != cfg.src_vocab_size:
        raise MtkitError(f"{d}: one vocab.json for a decoder vocabulary of {cfg.tgt_vocab_size}")
    ids = _special_ids(config, tok, (src_vocab, tgt_vocab))
    state, cfg = mtkit_state_dict(read_weights(d), cfg)
    src = Tokenizer(spm["source"], f"{d}/source.spm", src_vocab, ids)
    tgt = Tokenizer(spm["target"], f"{d}/target.spm", tgt_vocab, ids)
    if _own_ids(src) and _own_ids(tgt) and ids == DEFAULT_SPECIAL_IDS:  # an mtkit export
        src, tgt = Tokenizer(spm["source"], src.name), Tokenizer(spm["target"], tgt.name)
    model = build_model(cfg, ids)
    model.load_state_dict(state, strict=True)
    return model.eval(), src, tgt


def _own_ids(tok: Tokenizer) -> bool:
    """True when the vocabulary is the sentencepiece model's own numbering with mtkit's ids."""
    sp = tok.sp
    fixed = (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (0, 1, 2, 3)
    return fixed and tok.vocab == [sp.IdToPiece(i) for i in range(sp.GetPieceSize())]


def import_hf(
    model_dir: str | Path,
    output: str | Path,
    force: bool = False,
    source_lang: str | None = None,
    target_lang: str | None = None,
) -> Imported:
    """Write the MarianMTModel directory ``model_dir`` as the mtkit checkpoint ``output``, with
    the language codes given, else those of its ``tokenizer_config.json`` (``source_lang``,
    ``target_lang``); none when a side is named nowhere."""
    output = Path(output)
    if output.exists() and not force:
        raise MtkitError(f"{output}: already exists (give --force to replace it)")
    if output.is_dir():
        raise MtkitError(f"{output}: is a directory")
    model, src, tgt = read_marian(model_dir)
    languages = _languages(Path(model_dir), source_lang, target_lang)
    Checkpoint.of(
        model, src, tgt, languages=languages, imported_from={"format": "hf", "path": str(model_dir)}
    ).save(output)
    joint = src.pieces_by_id() == tgt.pieces_by_id()
    return Imported(output, model.cfg, model.special_ids, joint, languages)


def _languages(model_dir: Path, source: str | None, target: str | None) -> Languages | None:
    """The codes given, else the tokenizer's (Marian's tokenizer_config.json names them)."""
    config = model_dir / "tokenizer_config.json"
    named = _read_json(config) if config.is_file() else {}
    named = named if isinstance(named, dict) else {}
    src, tgt = source or named.get("source_lang"), target or named.get("target_lang")
    return Languages.from_dict({"src_lang": src, "tgt_lang": tgt})
