"""Export a checkpoint as a Hugging Face transformers MarianMTModel directory.

Marian (Junczys-Dowmunt et al., 2018) as implemented in ``transformers.models.marian`` is the
same post-LN Transformer as mtkit's. Checked against ``modeling_marian.py`` (transformers 5.x):

- embeddings are scaled by sqrt(d_model): ``scale_embedding=True``;
- positions: Marian's sinusoidal table has sines in the first half and cosines in the second,
  frequency 10000^(-2i/d), positions from 0 with no offset: ours exactly (HF recomputes it on
  load; the two agree to float32 rounding);
- post-LN residual blocks (Bart-style layers); Marian has no pre-LN variant, so ``pre_norm``
  models are refused;
- feed-forward: ``activation_function`` "relu" or "gelu" (HF's exact, erf-based GELU, as
  ``F.gelu``); every other variant switch of ModelConfig is refused by name (``SUPPORTS``);
- attention scales q.k by head_dim**-0.5, as ``scaled_dot_product_attention``; the q, k, v
  and out projections of :mod:`mtkit.model.weights` (unfused) become q/k/v/out_proj;
- embeddings: ``share_all_embeddings`` -> ``share_encoder_decoder_embeddings``; an output tied to
  the target embedding -> ``tie_word_embeddings``, else its own ``lm_head``; separate
  vocabularies -> ``vocab_size`` / ``decoder_vocab_size``; ``final_logits_bias`` is zero;
- ids: PAD 0, UNK 1, BOS 2 (``decoder_start_token_id``), EOS 3; an imported model (``mtkit
  import``) keeps its own: ``vocab.json`` is its piece table, the ids its ``special_ids``
  (OPUS-MT: PAD last, EOS 0, UNK 1, decoding from PAD), ``silu`` is written as ``swish``, its
  ``output_bias`` as ``final_logits_bias`` and ``scale_embedding`` as it is.

The tokenizer is a ``MarianTokenizer`` over our own sentencepiece models (``source.spm``,
``target.spm``) with ``vocab.json`` mapping each piece to its sentencepiece id, so it encodes to
exactly our ids and appends EOS, as mtkit does for every source.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from mtkit.config import ModelConfig, SearchConfig
from mtkit.data.tokenizer import DEFAULT_SPECIAL_IDS, SpecialIds, Tokenizer
from mtkit.errors import MtkitError
from mtkit.export import ANY, GENERAL, check_supported, require, staged_dir
from mtkit.languages import Languages
from mtkit.model.transformer import Transformer
from mtkit.model.weights import (
    DecoderLayerWeights,
    EncoderLayerWeights,
    LinearWeights,
    NormWeights,
    read_weights,
)

# what MarianMTModel can represent beyond the general fields: per-side layer counts (general) and
# its activation; every other variant is refused by name
SUPPORTS = {
    **GENERAL,
    "ffn_activation": frozenset({"relu", "gelu", "silu"}),
    "scale_embedding": ANY,
    "output_bias": ANY,
}
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "silu": "swish"}  # Marian's (OPUS-MT's) name
WHY = {"ffn_activation": "Marian has no gated feed-forward"}
# probe logits of the exported model must match ours this closely, or the export is refused
SELF_CHECK_ATOL = 1e-3


def check_marian_compatible(cfg: ModelConfig) -> None:
    """Refuse configurations that MarianMTModel cannot express (never export a different model)."""
    check_supported(cfg, "Hugging Face Marian", SUPPORTS, WHY)
    if cfg.pre_norm:
        raise MtkitError(
            "model option pre_norm=true (pre-LN) cannot be exported to Hugging Face Marian, "
            "which has post-LN layers only (no normalize_before); use --format ctranslate2"
        )
    if cfg.d_model % 2:
        raise MtkitError(
            f"model option d_model={cfg.d_model} is odd: Marian's sinusoidal positions need an "
            "even width"
        )


def marian_config(cfg: ModelConfig, ids: SpecialIds = DEFAULT_SPECIAL_IDS) -> dict[str, Any]:
    """MarianConfig keyword arguments for a model with config ``cfg`` and special ids ``ids``."""
    check_marian_compatible(cfg)
    return dict(
        vocab_size=cfg.src_vocab_size,
        decoder_vocab_size=cfg.tgt_vocab_size,
        d_model=cfg.d_model,
        encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.decoder_layers,
        encoder_attention_heads=cfg.heads,
        decoder_attention_heads=cfg.heads,
        encoder_ffn_dim=cfg.ffn_dim,
        decoder_ffn_dim=cfg.ffn_dim,
        max_position_embeddings=cfg.max_positions,
        activation_function=ACTIVATIONS[cfg.ffn_activation],
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation_dropout=cfg.activation_dropout,
        scale_embedding=cfg.scale_embedding,
        share_encoder_decoder_embeddings=cfg.share_all_embeddings,
        tie_word_embeddings=cfg.share_all_embeddings or cfg.tie_output,
        pad_token_id=ids.pad,
        bos_token_id=ids.bos,
        eos_token_id=ids.eos,
        decoder_start_token_id=ids.bos,
        forced_eos_token_id=ids.eos,
    )


def generation_defaults(
    cfg: ModelConfig, tcfg: SearchConfig | None = None, ids: SpecialIds = DEFAULT_SPECIAL_IDS
) -> dict[str, Any]:
    """GenerationConfig arguments that make ``generate`` search like ``mtkit translate``.

    Both score a finished hypothesis as sum(log p) / len**lenpen with len counting EOS, and keep
    the 2*beam best candidates so finishing beams never starve the search. mtkit's beam stops a
    sentence once ``beam`` hypotheses have finished: HF's ``early_stopping=True``. HF has no
    source-relative bound (max_len_a * src_len + max_len_b), so ``max_length`` is the model's
    position limit; pass ``max_length``/``max_new_tokens`` to ``generate`` for a tighter one.
    """
    tcfg = tcfg or SearchConfig()
    if tcfg.lenpen_style != "fairseq":
        raise MtkitError(
            f"lenpen_style={tcfg.lenpen_style!r} has no Hugging Face equivalent (use 'fairseq')"
        )
    return dict(
        decoder_start_token_id=ids.bos,
        bos_token_id=ids.bos,
        eos_token_id=ids.eos,
        pad_token_id=ids.pad,
        forced_eos_token_id=ids.eos,
        num_beams=tcfg.width,
        length_penalty=tcfg.lenpen,
        early_stopping=True,
        max_length=cfg.max_positions,
        min_new_tokens=tcfg.min_len,
        no_repeat_ngram_size=tcfg.no_repeat_ngram,
        suppress_tokens=sorted({ids.pad, ids.bos}),  # never generated by mtkit either
    )


# MarianMTModel's names (``model.{encoder,decoder}.layers.{i}.<name>``) of a layer's parts, by
# the fields of mtkit.model.weights' layer descriptions; each attention has q/k/v/out_proj
MARIAN_ATTENTIONS = {"self_attention": "self_attn", "cross_attention": "encoder_attn"}
MARIAN_NORMS = {
    "self_attention_norm": "self_attn_layer_norm",
    "cross_attention_norm": "encoder_attn_layer_norm",
    "ffn_norm": "final_layer_norm",
}
MARIAN_PROJECTIONS = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "out_proj"}


def _put(out: dict[str, Tensor], name: str, part: LinearWeights | NormWeights) -> None:
    out[f"{name}.weight"], out[f"{name}.bias"] = part.weight, part.bias  # type: ignore[assignment]


def _marian_layer(
    out: dict[str, Tensor], prefix: str, layer: EncoderLayerWeights | DecoderLayerWeights
) -> None:
    """One layer's weights under Marian's names (cross-attention in decoder layers only)."""
    for field, name in MARIAN_ATTENTIONS.items():
        if hasattr(layer, field):
            for role, proj in MARIAN_PROJECTIONS.items():
                _put(out, f"{prefix}.{name}.{proj}", getattr(getattr(layer, field), role))
    for field, name in MARIAN_NORMS.items():
        if hasattr(layer, field):
            _put(out, f"{prefix}.{name}", getattr(layer, field))
    _put(out, f"{prefix}.fc1", layer.ffn.fc1)
    _put(out, f"{prefix}.fc2", layer.ffn.fc2)


def marian_state_dict(model: Transformer) -> dict[str, Tensor]:
    """Our weights under MarianMTModel's parameter names (positions excepted: HF computes them).

    Tied weights appear under every name that shares them, as in HF's own state dict.
    """
    cfg = model.cfg
    check_marian_compatible(cfg)
    weights = read_weights(model)
    out: dict[str, Tensor] = {}
    out["model.encoder.embed_tokens.weight"] = weights.src_embedding
    out["model.decoder.embed_tokens.weight"] = weights.tgt_embedding
    if cfg.share_all_embeddings:
        out["model.shared.weight"] = weights.src_embedding
    out["lm_head.weight"] = weights.projection
    bias = weights.output_bias
    out["final_logits_bias"] = (
        torch.zeros(1, cfg.tgt_vocab_size) if bias is None else bias.reshape(1, -1)
    )
    for side, layers in (("encoder", weights.encoder), ("decoder", weights.decoder)):
        for i, layer in enumerate(layers):
            _marian_layer(out, f"model.{side}.layers.{i}", layer)
    return out


def build_marian(model: Transformer) -> nn.Module:
    """A MarianMTModel (eval mode) holding ``model``'s weights; every parameter is accounted for."""
    transformers = require("transformers", "hf", "exporting to Hugging Face transformers")
    ours = marian_state_dict(model)
    config = transformers.MarianConfig(**marian_config(model.cfg, model.special_ids))
    hf = transformers.MarianMTModel(config).eval()
    state = hf.state_dict()
    computed = {k for k in state if k.endswith("embed_positions.weight")}
    unmapped = set(state) - set(ours) - computed
    unknown = set(ours) - set(state)
    if unmapped or unknown:  # a transformers version with other names: fail, never half-load
        raise MtkitError(
            f"this transformers {transformers.__version__} MarianMTModel does not match mtkit's "
            f"export (unmapped: {sorted(unmapped)[:3]}, unknown: {sorted(unknown)[:3]})"
        )
    for name, tensor in ours.items():
        if state[name].shape != tensor.shape:
            raise MtkitError(
                f"export: {name} has shape {tuple(tensor.shape)}, "
                f"MarianMTModel expects {tuple(state[name].shape)}"
            )
        state[name] = tensor
    hf.load_state_dict(state, strict=True)
    return hf


@torch.no_grad()
def max_logit_difference(model: Transformer, hf: nn.Module) -> float:
    """Largest |logit| difference between ``model`` and ``hf`` on a small padded probe batch."""
    v_src, v_tgt = model.cfg.src_vocab_size, model.cfg.tgt_vocab_size
    ids = model.special_ids
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, max(v_src, 5), (2, 7), generator=g)
    src[:, -1] = ids.eos
    src[1, 4:] = ids.pad  # second row: 3 tokens + EOS + padding
    src[1, 3] = ids.eos
    tgt = torch.randint(4, max(v_tgt, 5), (2, 6), generator=g)
    tgt[:, 0] = ids.bos
    ours = model.eval()(src, tgt)
    theirs = hf(input_ids=src, attention_mask=src.ne(ids.pad).long(), decoder_input_ids=tgt).logits
    return float((ours - theirs).abs().max())


def write_tokenizer(
    out_dir: Path,
    src: Tokenizer,
    tgt: Tokenizer,
    max_length: int,
    languages: Languages | None = None,
) -> None:
    """MarianTokenizer files whose ids are ours (source.spm, vocab.json, ...): the sentencepiece
    ids, or an imported model's piece table and special pieces; the language codes as
    MarianTokenizer's ``source_lang``/``target_lang`` (what `mtkit import` reads back)."""
    transformers = require("transformers", "hf", "exporting to Hugging Face transformers")
    (out_dir / "source.spm").write_bytes(src.proto)
    (out_dir / "target.spm").write_bytes(tgt.proto)
    separate = src.proto != tgt.proto and src.pieces_by_id() != tgt.pieces_by_id()
    files = {"vocab": out_dir / "vocab.json"}
    _write_vocab(files["vocab"], src)
    if separate:
        files["target_vocab_file"] = out_dir / "target_vocab.json"
        _write_vocab(files["target_vocab_file"], tgt)
    ids, pieces = tgt.specials, tgt.pieces_by_id()
    names = {
        "unk_token": pieces[ids.unk],
        "eos_token": pieces[ids.eos],
        "pad_token": pieces[ids.pad],
    }
    if tgt.vocab is None:
        names["bos_token"] = "<s>"  # Marian's tokenizer has none; our start token
    if languages is not None:
        names["source_lang"], names["target_lang"] = languages.pair
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Recommended: pip install sacremoses" (unused here)
        tok = transformers.MarianTokenizer(
            source_spm=str(out_dir / "source.spm"),
            target_spm=str(out_dir / "target.spm"),
            **{k: str(v) for k, v in files.items()},
            separate_vocabs=separate,
            model_max_length=max_length,
            **names,
        )
    tok.save_pretrained(str(out_dir))
    _check_tokenizer(tok, src)


def _write_vocab(path: Path, tok: Tokenizer) -> None:
    vocab = {piece: i for i, piece in enumerate(tok.pieces_by_id())}
    if len(vocab) != len(tok):
        raise MtkitError(f"{tok.name}: duplicate pieces, cannot write vocab.json")
    path.write_text(json.dumps(vocab, ensure_ascii=False, indent=1), encoding="utf-8")


def _check_tokenizer(tok: Any, src: Tokenizer) -> None:
    """The HF tokenizer must give our ids + EOS on text made of the vocabulary's own pieces
    (the first 60 normal ones: not the byte pieces of a byte-fallback model, control bytes)."""
    sp = src.sp
    odd = (sp.IsUnused, sp.IsControl, sp.IsUnknown, sp.IsByte)
    normal = [i for i in range(4, sp.GetPieceSize()) if not any(is_odd(i) for is_odd in odd)]
    pieces = [sp.IdToPiece(i) for i in normal[:60]]
    text = src.sp.DecodePieces(pieces)
    ids = src.specials
    want = src.encode_one(text) + [ids.eos]
    got = tok(text)["input_ids"]
    if got != want or tok.unk_token_id != ids.unk or tok.pad_token_id != ids.pad:
        raise MtkitError("export: the Hugging Face tokenizer does not reproduce mtkit's ids")


@dataclass
class HFExport:
    out_dir: Path
    max_logit_difference: float


def export_hf(
    checkpoint: str | Path,
    out_dir: str | Path,
    force: bool = False,
    search: SearchConfig | None = None,
) -> HFExport:
    """Write ``checkpoint`` as a MarianMTModel directory loadable offline by ``from_pretrained``."""
    from mtkit.checkpoint import load_for_inference

    loaded = load_for_inference(checkpoint)
    check_marian_compatible(loaded.config)
    transformers = require("transformers", "hf", "exporting to Hugging Face transformers")
    generation = generation_defaults(loaded.config, search, loaded.model.special_ids)
    with staged_dir(out_dir, force) as tmp:
        hf = build_marian(loaded.model)
        diff = max_logit_difference(loaded.model, hf)
        if not diff <= SELF_CHECK_ATOL:
            raise MtkitError(f"export check failed: Marian logits differ from ours by {diff:.2e}")
        hf.generation_config = transformers.GenerationConfig(**generation)
        progress = transformers.utils.logging.is_progress_bar_enabled()
        transformers.utils.logging.disable_progress_bar()
        try:
            hf.save_pretrained(str(tmp))
        finally:
            if progress:
                transformers.utils.logging.enable_progress_bar()
        max_len = loaded.config.max_positions
        write_tokenizer(tmp, loaded.src_tokenizer, loaded.tgt_tokenizer, max_len, loaded.languages)
    return HFExport(Path(out_dir), diff)
