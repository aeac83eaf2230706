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

from pathlib import Path
from typing import Any

import numpy as np

from mtkit.checkpoint import load_for_inference
from mtkit.config import ModelConfig
from mtkit.data.tokenizer import Tokenizer
from mtkit.errors import MtkitError
from mtkit.export import ANY, GENERAL, check_supported, staged_dir
from mtkit.formats.ctranslate2 import (
    QUANTIZATIONS,
    ctranslate2_module,
    suppressed,
    write_sidecar,
)

# what CTranslate2 4.8's specs can represent beyond the general fields (a whitelist): RMSNorm,
# learned positions (a position table), Shaw's relative positions, rotary (non-interleaved: the
# rotate-half layout mtkit uses, rotary_interleave=False), grouped/multi-query attention
# (num_heads_kv), GELU and the gated feed-forwards (ffn_glu), no biases, shared layers (written
# as copies). Not: ALiBi (CTranslate2 has it in the decoder only, mtkit's acts in the encoder
# too) and the average attention network.
SUPPORTS = {
    **GENERAL,
    "norm": frozenset({"layernorm", "rmsnorm"}),
    "norm_eps": ANY,
    "positions": frozenset({"sinusoidal", "learned", "relative", "rope"}),
    "max_relative_position": ANY,
    "kv_heads": ANY,
    "ffn_activation": frozenset({"relu", "gelu", "silu", "swiglu", "geglu"}),
    "bias": ANY,
    "share_layers": ANY,
    "scale_embedding": ANY,  # imported Marian models
    "output_bias": ANY,  # Marian's final_logits_bias: the projection's bias
}
WHY = {
    "positions": "CTranslate2 has ALiBi in the decoder only, and mtkit's acts in the encoder too",
    "decoder_self_attention": "CTranslate2 has no average attention layer",
}
GATED = {"swiglu": "SWISH", "geglu": "GELU"}  # the activation of the gated half (ffn.gate)
PLAIN = {"relu": "RELU", "gelu": "GELU", "silu": "SWISH"}  # CTranslate2's names


def _linear(spec: Any, w: dict[str, np.ndarray], *names: str) -> None:
    """``spec`` = the Linear layers ``names`` stacked by rows (a fused projection), bias too."""
    spec.weight = np.concatenate([w[f"{n}.weight"] for n in names])
    if f"{names[0]}.bias" in w:
        spec.bias = np.concatenate([w[f"{n}.bias"] for n in names])


def _norm(spec: Any, w: dict[str, np.ndarray], name: str) -> None:
    spec.gamma = w[f"{name}.weight"]
    if hasattr(spec, "beta"):  # LayerNorm; without bias its beta is zero
        spec.beta = w.get(f"{name}.bias", np.zeros_like(spec.gamma))


def _attention(spec: Any, w: dict[str, np.ndarray], p: str, cross: bool) -> None:
    """An attention's projections: CTranslate2 fuses self-attention [q; k; v] and cross-
    attention [k; v], as mtkit does (``qkv``, or ``q`` + ``kv`` with fewer key/value heads)."""
    fused = (f"{p}.qkv",) if f"{p}.qkv.weight" in w else (f"{p}.q", f"{p}.kv")
    if cross:
        _linear(spec.linear[0], w, f"{p}.q")
        _linear(spec.linear[1], w, f"{p}.kv")
    else:
        _linear(spec.linear[0], w, *fused)
    _linear(spec.linear[-1], w, f"{p}.out")
    if f"{p}.positions.keys.weight" in w:  # Shaw: same tables, same clipping
        spec.relative_position_keys = w[f"{p}.positions.keys.weight"]
        spec.relative_position_values = w[f"{p}.positions.values.weight"]


def _ffn(spec: Any, w: dict[str, np.ndarray], p: str) -> None:
    if f"{p}.gate.weight" in w:  # CTranslate2: linear_0 activated, linear_0_noact the other
        _linear(spec.linear_0, w, f"{p}.gate")
        _linear(spec.linear_0_noact, w, f"{p}.fc1")
    else:
        _linear(spec.linear_0, w, f"{p}.fc1")
    _linear(spec.linear_1, w, f"{p}.fc2")


def _side_options(cfg: ModelConfig) -> dict[str, Any]:
    """Constructor options shared by CTranslate2's encoder and decoder specs."""
    from ctranslate2.specs import common_spec

    activation = GATED.get(cfg.ffn_activation) or PLAIN[cfg.ffn_activation]
    kv_heads = cfg.kv_heads or cfg.heads
    return dict(
        pre_norm=cfg.pre_norm,
        activation=common_spec.Activation[activation],
        ffn_glu=cfg.ffn_activation in GATED,
        rms_norm=cfg.norm == "rmsnorm",
        relative_position=cfg.positions == "relative",
        num_heads_kv=kv_heads if kv_heads != cfg.heads else None,
        rotary_dim=0 if cfg.positions == "rope" else None,  # 0: the whole head
        rotary_interleave=False,
    )


def ct2_spec(model: Any, src: Tokenizer, tgt: Tokenizer) -> Any:
    """A CTranslate2 TransformerSpec holding ``model``'s weights and our vocabularies."""
    check_supported(model.cfg, "CTranslate2", SUPPORTS, WHY)
    ctranslate2_module()
    from ctranslate2.specs import transformer_spec

    cfg: ModelConfig = model.cfg
    w = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
    options = _side_options(cfg)
    enc = transformer_spec.TransformerEncoderSpec(cfg.encoder_layers, cfg.heads, **options)
    dec = transformer_spec.TransformerDecoderSpec(cfg.decoder_layers, cfg.heads, **options)
    spec = transformer_spec.TransformerSpec(enc, dec)
    enc.embeddings[0].weight = w["src_embed.weight"]
    dec.embeddings.weight = w["tgt_embed.weight"]
    dec.projection.weight = w.get("output.weight", w["tgt_embed.weight"])
    if model.output_bias is not None:
        dec.projection.bias = model.output_bias.detach().float().cpu().numpy()
    for part, positions in ((enc, model.src_positions), (dec, model.tgt_positions)):
        part.scale_embeddings = cfg.scale_embedding  # True: sqrt(d_model)
        if positions is not None:  # sinusoidal or learned: row t is position t, from 0
            table = positions(cfg.max_positions, 0).detach().float().cpu().numpy()
            part.position_encodings.encodings = table
    for i, layer in enumerate(enc.layer):
        p = f"encoder.{0 if cfg.share_layers else i}"  # shared layers: written as copies
        _attention(layer.self_attention, w, f"{p}.attn", cross=False)
        _norm(layer.self_attention.layer_norm, w, f"{p}.attn_res.norm")
        _ffn(layer.ffn, w, f"{p}.ffn")
        _norm(layer.ffn.layer_norm, w, f"{p}.ffn_res.norm")
    for i, layer in enumerate(dec.layer):
        p = f"decoder.{0 if cfg.share_layers else i}"
        _attention(layer.self_attention, w, f"{p}.self_attn", cross=False)
        _norm(layer.self_attention.layer_norm, w, f"{p}.self_res.norm")
        _attention(layer.attention, w, f"{p}.cross_attn", cross=True)
        _norm(layer.attention.layer_norm, w, f"{p}.cross_res.norm")
        _ffn(layer.ffn, w, f"{p}.ffn")
        _norm(layer.ffn.layer_norm, w, f"{p}.ffn_res.norm")
    if cfg.pre_norm:
        _norm(enc.layer_norm, w, "encoder_norm")
        _norm(dec.layer_norm, w, "decoder_norm")
    spec.register_source_vocabulary(src.pieces_by_id())  # an imported table, or the spm's
    spec.register_target_vocabulary(tgt.pieces_by_id())
    ids, piece = tgt.specials, tgt.id_to_piece
    config = spec.config
    config.unk_token, config.eos_token = piece(ids.unk), piece(ids.eos)
    config.bos_token = piece(ids.bos)
    config.decoder_start_token = piece(ids.bos)  # our first decoder input (Marian: its PAD)
    config.add_source_bos, config.add_source_eos = False, True  # our source = pieces + EOS
    config.layer_norm_epsilon = cfg.norm_eps
    return spec


PROBE_STEPS = 12  # greedy tokens compared per probe sentence


def _convert(ct2: Any, spec: Any, out: Path, quantization: str) -> None:
    class _Converter(ct2.converters.Converter):
        def _load(self) -> Any:
            return spec

    try:
        _Converter().convert(str(out), quantization=quantization, force=True)
    except (ValueError, NotImplementedError, RuntimeError) as err:
        raise MtkitError(f"CTranslate2 conversion failed: {err}") from None


def probe_sources(vocab_size: int, count: int = 8) -> list[list[int]]:
    """A fixed probe batch of source ids (no EOS): varied lengths, ids past the specials."""
    span = max(vocab_size - 4, 1)
    return [[4 + (7 * i + 3 * j) % span for j in range(3 + 2 * i)] for i in range(count)]


def greedy_mismatch(model: Any, src: Tokenizer, tgt: Tokenizer, model_dir: Path) -> str | None:
    """Greedy outputs of the float32 CTranslate2 model in ``model_dir`` against mtkit's on the
    probe batch; a description of the first difference, or None when all agree."""
    from mtkit.config import SearchConfig
    from mtkit.decoding.batching import pad_batch
    from mtkit.decoding.search import generate

    s_ids, t_ids = src.specials, tgt.specials
    sources = [[t for t in row if t not in set(s_ids.to_dict().values())]
               for row in probe_sources(len(src))]  # fmt: skip
    search = SearchConfig(beam=1, max_len_a=0.0, max_len_b=PROBE_STEPS, min_len=0)
    batch = pad_batch([ids + [s_ids.eos] for ids in sources], pad=s_ids.pad)
    ours = [hyps[0].tokens for hyps in generate([model], batch, search)]
    translator = ctranslate2_module().Translator(str(model_dir), device="cpu",
                                                 compute_type="float32")  # fmt: skip
    pieces = [[src.id_to_piece(t) for t in ids] for ids in sources]
    results = translator.translate_batch(
        pieces, beam_size=1, max_decoding_length=PROBE_STEPS + 1, min_decoding_length=0,
        max_input_length=0, return_end_token=True, suppress_sequences=suppressed(tgt),
    )  # fmt: skip
    for i, (want, result) in enumerate(zip(ours, results, strict=True)):
        got = [tgt.piece_to_id(p) for p in result.hypotheses[0]]
        got = got[: got.index(t_ids.eos)] if t_ids.eos in got else got
        if got[:PROBE_STEPS] != want:
            return f"probe sentence {i}: CTranslate2 {got[:PROBE_STEPS]} vs mtkit {want}"
    return None


def export_ct2(
    checkpoint: str | Path,
    out_dir: str | Path,
    quantization: str = "float32",
    force: bool = False,
) -> Path:
    """Convert ``checkpoint`` into a self-contained CTranslate2 model directory.

    The directory holds CTranslate2's ``model.bin``, ``config.json`` and vocabularies, plus
    ``source.spm``/``target.spm`` and ``mtkit.json`` (position limit, provenance). The float32
    conversion is checked first: CTranslate2's greedy output on a probe batch must equal
    mtkit's token for token, or nothing is written.
    """
    if quantization not in QUANTIZATIONS:
        raise MtkitError(
            f"unknown quantization '{quantization}' (known: {', '.join(QUANTIZATIONS)})"
        )
    loaded = load_for_inference(checkpoint)
    ct2 = ctranslate2_module()
    model, src, tgt = loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer
    with staged_dir(out_dir, force) as tmp:
        _convert(ct2, ct2_spec(model, src, tgt), tmp, "float32")
        problem = greedy_mismatch(model, src, tgt, tmp)
        if problem is not None:
            raise MtkitError(f"export check failed: CTranslate2's greedy output differs from "
                             f"mtkit's ({problem}); nothing was written")  # fmt: skip
        if quantization != "float32":  # the checked float32 model, quantized
            _convert(ct2, ct2_spec(model, src, tgt), tmp, quantization)
        write_sidecar(tmp, src, tgt, loaded.config.max_positions, None,
                      ctranslate2_version=ct2.__version__, checkpoint=str(checkpoint),
                      quantization=quantization)  # fmt: skip
    return Path(out_dir)
