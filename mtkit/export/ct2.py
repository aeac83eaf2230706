"""Export to CTranslate2 (OpenNMT) through its model specification API.

The spec is filled straight from our weights, no Hugging Face detour: CTranslate2's
``TransformerSpec`` has the same layout as mtkit's model (fused [q; k; v] self-attention and
[k; v] cross-attention projections, sqrt(d_model) embedding scale, an explicit position table, post-
or pre-LN with final norms), so pre-LN models export too. Its Marian loader would not fit: it
starts the decoder from a zero embedding and drops the last vocabulary entry.

The exported directory is decoded by :mod:`mtkit.engines.ct2` (`mtkit translate --engine
ctranslate2`), which documents how its search differs from mtkit's own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from mtkit import __version__
from mtkit.checkpoint import load_for_inference
from mtkit.config import ModelConfig
from mtkit.data.tokenizer import Tokenizer
from mtkit.errors import MtkitError
from mtkit.export import check_exportable, require, staged_dir

QUANTIZATIONS = ("float32", "int8_float32", "int8", "float16")
METADATA = "mtkit.json"
LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, which mtkit's layers use


def ctranslate2_module() -> Any:
    return require("ctranslate2", "ct2", "CTranslate2 export and decoding")


def _linear(spec: Any, weights: dict[str, np.ndarray], name: str) -> None:
    spec.weight = weights[f"{name}.weight"]
    spec.bias = weights[f"{name}.bias"]


def _norm(spec: Any, weights: dict[str, np.ndarray], name: str) -> None:
    spec.gamma = weights[f"{name}.weight"]
    spec.beta = weights[f"{name}.bias"]


def ct2_spec(model: Any, src: Tokenizer, tgt: Tokenizer) -> Any:
    """A CTranslate2 TransformerSpec holding ``model``'s weights and our vocabularies."""
    check_exportable(model.cfg, "CTranslate2")
    ctranslate2_module()
    from ctranslate2.specs import common_spec, transformer_spec

    cfg: ModelConfig = model.cfg
    w = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
    positions = model.src_positions.table.detach().float().cpu().numpy()  # sinusoidal
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg.encoder_layers, cfg.decoder_layers),
        cfg.heads,
        pre_norm=cfg.pre_norm,
        activation=common_spec.Activation.RELU,
    )
    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = w["src_embed.weight"]
    dec.embeddings.weight = w["tgt_embed.weight"]
    dec.projection.weight = w.get("output.weight", w["tgt_embed.weight"])
    for part in (enc, dec):
        part.scale_embeddings = True  # sqrt(d_model)
        part.position_encodings.encodings = positions  # row t is position t, from 0
    for i, layer in enumerate(enc.layer):
        p = f"encoder.{i}"
        _linear(layer.self_attention.linear[0], w, f"{p}.attn.qkv")
        _linear(layer.self_attention.linear[1], w, f"{p}.attn.out")
        _norm(layer.self_attention.layer_norm, w, f"{p}.attn_res.norm")
        _linear(layer.ffn.linear_0, w, f"{p}.ffn.fc1")
        _linear(layer.ffn.linear_1, w, f"{p}.ffn.fc2")
        _norm(layer.ffn.layer_norm, w, f"{p}.ffn_res.norm")
    for i, layer in enumerate(dec.layer):
        p = f"decoder.{i}"
        _linear(layer.self_attention.linear[0], w, f"{p}.self_attn.qkv")
        _linear(layer.self_attention.linear[1], w, f"{p}.self_attn.out")
        _norm(layer.self_attention.layer_norm, w, f"{p}.self_res.norm")
        _linear(layer.attention.linear[0], w, f"{p}.cross_attn.q")
        _linear(layer.attention.linear[1], w, f"{p}.cross_attn.kv")
        _linear(layer.attention.linear[2], w, f"{p}.cross_attn.out")
        _norm(layer.attention.layer_norm, w, f"{p}.cross_res.norm")
        _linear(layer.ffn.linear_0, w, f"{p}.ffn.fc1")
        _linear(layer.ffn.linear_1, w, f"{p}.ffn.fc2")
        _norm(layer.ffn.layer_norm, w, f"{p}.ffn_res.norm")
    if cfg.pre_norm:
        _norm(enc.layer_norm, w, "encoder_norm")
        _norm(dec.layer_norm, w, "decoder_norm")
    spec.register_source_vocabulary([src.sp.IdToPiece(i) for i in range(len(src))])
    spec.register_target_vocabulary([tgt.sp.IdToPiece(i) for i in range(len(tgt))])
    config = spec.config
    config.unk_token, config.bos_token, config.eos_token = "<unk>", "<s>", "</s>"
    config.decoder_start_token = "<s>"  # BOS_ID: our first decoder input
    config.add_source_bos, config.add_source_eos = False, True  # our source = pieces + EOS
    config.layer_norm_epsilon = LAYER_NORM_EPS
    return spec


def export_ct2(
    checkpoint: str | Path,
    out_dir: str | Path,
    quantization: str = "float32",
    force: bool = False,
) -> Path:
    """Convert ``checkpoint`` into a self-contained CTranslate2 model directory.

    The directory holds CTranslate2's ``model.bin``, ``config.json`` and vocabularies, plus
    ``source.spm``/``target.spm`` and ``mtkit.json`` (position limit, provenance).
    """
    if quantization not in QUANTIZATIONS:
        raise MtkitError(
            f"unknown quantization '{quantization}' (known: {', '.join(QUANTIZATIONS)})"
        )
    loaded = load_for_inference(checkpoint)
    ct2 = ctranslate2_module()
    spec = ct2_spec(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer)

    class _Converter(ct2.converters.Converter):
        def _load(self) -> Any:
            return spec

    with staged_dir(out_dir, force) as tmp:
        try:
            _Converter().convert(str(tmp), quantization=quantization, force=True)
        except (ValueError, NotImplementedError, RuntimeError) as err:
            raise MtkitError(f"CTranslate2 conversion failed: {err}") from None
        (tmp / "source.spm").write_bytes(loaded.src_tokenizer.proto)
        (tmp / "target.spm").write_bytes(loaded.tgt_tokenizer.proto)
        meta = {"format": "mtkit-ctranslate2", "mtkit_version": __version__,
                "ctranslate2_version": ct2.__version__, "checkpoint": str(checkpoint),
                "quantization": quantization,
                "max_positions": loaded.config.max_positions}  # fmt: skip
        (tmp / METADATA).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return Path(out_dir)
