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
from torch import Tensor

from mtkit.checkpoint import LoadedModel, load_for_inference
from mtkit.config import DEFAULT_LAYER, ModelConfig, alignment_layer
from mtkit.data.shortlist import read_shortlist_for
from mtkit.data.tokenizer import Tokenizer
from mtkit.errors import MtkitError
from mtkit.export import ANY, GENERAL, check_supported, staged_dir
from mtkit.formats.ctranslate2 import (
    QUANTIZATIONS,
    VMAP,
    ctranslate2_module,
    suppressed,
    vmap_text,
    write_sidecar,
)
from mtkit.model.weights import (
    AttentionWeights,
    DecoderLayerWeights,
    EncoderLayerWeights,
    FeedForwardWeights,
    LinearWeights,
    NormWeights,
    embedding_positions,
    read_weights,
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


def _array(tensor: Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().numpy()


def _linear(spec: Any, *parts: LinearWeights) -> None:
    """``spec`` = the projections ``parts`` stacked by rows (a fused projection), bias too."""
    spec.weight = np.concatenate([_array(p.weight) for p in parts])
    if parts[0].bias is not None:
        spec.bias = np.concatenate([_array(p.bias) for p in parts if p.bias is not None])


def _norm(spec: Any, norm: NormWeights) -> None:
    spec.gamma = _array(norm.weight)
    if hasattr(spec, "beta"):  # LayerNorm; without bias its beta is zero
        spec.beta = np.zeros_like(spec.gamma) if norm.bias is None else _array(norm.bias)


def _attention(spec: Any, attention: AttentionWeights, cross: bool) -> None:
    """An attention's projections: CTranslate2 fuses self-attention [q; k; v] and cross-
    attention [k; v] (k and v of Hkv heads with ``num_heads_kv``)."""
    a = attention
    if cross:
        _linear(spec.linear[0], a.q)
        _linear(spec.linear[1], a.k, a.v)
    else:
        _linear(spec.linear[0], a.q, a.k, a.v)
    _linear(spec.linear[-1], a.out)
    if a.relative is not None:  # Shaw: same tables, same clipping
        spec.relative_position_keys = _array(a.relative.keys)
        spec.relative_position_values = _array(a.relative.values)


def _ffn(spec: Any, ffn: FeedForwardWeights) -> None:
    if ffn.gate is not None:  # CTranslate2: linear_0 activated, linear_0_noact the other
        _linear(spec.linear_0, ffn.gate)
        _linear(spec.linear_0_noact, ffn.fc1)
    else:
        _linear(spec.linear_0, ffn.fc1)
    _linear(spec.linear_1, ffn.fc2)


def _layer(spec: Any, layer: EncoderLayerWeights | DecoderLayerWeights) -> None:
    """One layer's weights; shared layers are written as copies."""
    _attention(spec.self_attention, layer.self_attention, cross=False)  # type: ignore[arg-type]
    _norm(spec.self_attention.layer_norm, layer.self_attention_norm)
    if isinstance(layer, DecoderLayerWeights):
        _attention(spec.attention, layer.cross_attention, cross=True)
        _norm(spec.attention.layer_norm, layer.cross_attention_norm)
    _ffn(spec.ffn, layer.ffn)
    _norm(spec.ffn.layer_norm, layer.ffn_norm)


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


def ct2_spec(model: Any, src: Tokenizer, tgt: Tokenizer, source_prefix: str | None = None) -> Any:
    """A CTranslate2 TransformerSpec holding ``model``'s weights and our vocabularies.

    ``source_prefix``: a source piece CTranslate2 puts before every source (its
    ``add_source_bos`` with that piece as ``bos_token``; the decoder still starts from
    ``decoder_start_token``): a multilingual model's target-language tag, for a package that
    translates into one language (`mtkit export --format argos --target-lang`).
    """
    check_supported(model.cfg, "CTranslate2", SUPPORTS, WHY)
    ctranslate2_module()
    from ctranslate2.specs import transformer_spec

    cfg: ModelConfig = model.cfg
    weights = read_weights(model)
    options = _side_options(cfg)
    enc = transformer_spec.TransformerEncoderSpec(cfg.encoder_layers, cfg.heads, **options)
    dec = transformer_spec.TransformerDecoderSpec(
        cfg.decoder_layers,
        cfg.heads,
        **options,
        alignment_layer=alignment_layer(DEFAULT_LAYER, cfg.decoder_layers),
        alignment_heads=cfg.heads,  # all heads averaged, as mtkit's own engine does
    )
    spec = transformer_spec.TransformerSpec(enc, dec)
    enc.embeddings[0].weight = _array(weights.src_embedding)
    dec.embeddings.weight = _array(weights.tgt_embedding)  # tied: the projection is the same
    dec.projection.weight = (
        dec.embeddings.weight if weights.output is None else _array(weights.output)
    )
    if weights.output_bias is not None:
        dec.projection.bias = _array(weights.output_bias)
    for part, table in zip((enc, dec), embedding_positions(cfg, weights), strict=True):
        part.scale_embeddings = cfg.scale_embedding  # True: sqrt(d_model)
        if table is not None:  # sinusoidal or learned: row t is position t, from 0
            part.position_encodings.encodings = _array(table)
    for side, layers in ((enc, weights.encoder), (dec, weights.decoder)):
        for layer_spec, layer in zip(side.layer, layers, strict=True):
            _layer(layer_spec, layer)
    if weights.encoder_norm is not None and weights.decoder_norm is not None:  # pre-LN
        _norm(enc.layer_norm, weights.encoder_norm)
        _norm(dec.layer_norm, weights.decoder_norm)
    spec.register_source_vocabulary(src.pieces_by_id())  # an imported table, or the spm's
    spec.register_target_vocabulary(tgt.pieces_by_id())
    ids, piece = tgt.specials, tgt.id_to_piece
    config = spec.config
    config.unk_token, config.eos_token = piece(ids.unk), piece(ids.eos)
    config.bos_token = piece(ids.bos)
    config.decoder_start_token = piece(ids.bos)  # our first decoder input (Marian: its PAD)
    config.add_source_bos, config.add_source_eos = False, True  # our source = pieces + EOS
    if source_prefix is not None:  # [tag] + pieces + EOS, as mtkit encodes a tagged line
        config.add_source_bos, config.bos_token = True, source_prefix
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


def greedy_mismatch(
    model: Any, src: Tokenizer, tgt: Tokenizer, model_dir: Path, source_prefix: str | None = None
) -> str | None:
    """Greedy outputs of the float32 CTranslate2 model in ``model_dir`` against mtkit's on the
    probe batch (mtkit's sources led by ``source_prefix``'s id, where CTranslate2 adds it); a
    description of the first difference, or None when all agree."""
    from mtkit.config import SearchConfig
    from mtkit.decoding.batching import pad_batch
    from mtkit.decoding.search import generate

    s_ids, t_ids = src.specials, tgt.specials
    sources = [
        [t for t in row if t not in set(s_ids.to_dict().values())]
        for row in probe_sources(len(src))
    ]
    search = SearchConfig(beam=1, max_len_a=0.0, max_len_b=PROBE_STEPS, min_len=0)
    lead = [] if source_prefix is None else [src.piece_to_id(source_prefix)]
    batch = pad_batch([lead + ids + [s_ids.eos] for ids in sources], pad=s_ids.pad)
    ours = [hyps[0].tokens for hyps in generate([model], batch, search)]
    translator = ctranslate2_module().Translator(
        str(model_dir), device="cpu", compute_type="float32"
    )
    pieces = [[src.id_to_piece(t) for t in ids] for ids in sources]
    results = translator.translate_batch(
        pieces,
        beam_size=1,
        max_decoding_length=PROBE_STEPS + 1,
        min_decoding_length=0,
        max_input_length=0,
        return_end_token=True,
        suppress_sequences=suppressed(tgt),
    )
    for i, (want, result) in enumerate(zip(ours, results, strict=True)):
        got = [tgt.piece_to_id(p) for p in result.hypotheses[0]]
        got = got[: got.index(t_ids.eos)] if t_ids.eos in got else got
        if got[:PROBE_STEPS] != want:
            return f"probe sentence {i}: CTranslate2 {got[:PROBE_STEPS]} vs mtkit {want}"
    return None


def convert_checked(
    loaded: LoadedModel, out: Path, quantization: str, source_prefix: str | None = None
) -> None:
    """CTranslate2's files (``model.bin``, ``config.json``, vocabularies) of ``loaded`` into the
    directory ``out``: converted to float32 and checked first (greedy output on a probe batch
    equal to mtkit's, token for token, or an error), then quantized if asked."""
    ct2 = ctranslate2_module()
    model, src, tgt = loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer
    _convert(ct2, ct2_spec(model, src, tgt, source_prefix), out, "float32")
    problem = greedy_mismatch(model, src, tgt, out, source_prefix)
    if problem is not None:
        raise MtkitError(
            f"export check failed: CTranslate2's greedy output differs from "
            f"mtkit's ({problem}); nothing was written"
        )
    if quantization != "float32":  # the checked float32 model, quantized
        _convert(ct2, ct2_spec(model, src, tgt, source_prefix), out, quantization)


def export_ct2(
    checkpoint: str | Path,
    out_dir: str | Path,
    quantization: str = "float32",
    force: bool = False,
    shortlist: str | Path = "",
) -> Path:
    """Convert ``checkpoint`` into a self-contained CTranslate2 model directory.

    The directory holds CTranslate2's ``model.bin``, ``config.json`` and vocabularies, plus
    ``source.spm``/``target.spm`` and ``mtkit.json`` (position limit, provenance), and with a
    ``shortlist`` file (`mtkit shortlist build`) its vocabulary map ``vmap.txt``. The float32
    conversion is checked first: CTranslate2's greedy output on a probe batch must equal
    mtkit's token for token, or nothing is written.
    """
    if quantization not in QUANTIZATIONS:
        raise MtkitError(
            f"unknown quantization '{quantization}' (known: {', '.join(QUANTIZATIONS)})"
        )
    loaded = load_for_inference(checkpoint)
    ct2 = ctranslate2_module()
    src, tgt = loaded.src_tokenizer, loaded.tgt_tokenizer
    layers = loaded.model.cfg.decoder_layers
    vmap: dict = {}
    if shortlist:
        found = read_shortlist_for(shortlist, src, tgt, "--shortlist")
        vmap = {
            "vmap": VMAP,
            "shortlist": {
                "file": str(shortlist),
                "method": found.method,
                "top_k": found.top_k,
                "frequent": len(found.frequent),
            },
        }
    with staged_dir(out_dir, force) as tmp:
        convert_checked(loaded, tmp, quantization)
        if shortlist:
            (tmp / VMAP).write_text(vmap_text(found, src, tgt), encoding="utf-8")
        write_sidecar(
            tmp,
            src,
            tgt,
            loaded.config.max_positions,
            loaded.languages,
            ctranslate2_version=ct2.__version__,
            checkpoint=str(checkpoint),
            quantization=quantization,
            decoder_layers=layers,
            alignment_layer=alignment_layer(DEFAULT_LAYER, layers),
            source_pieces=loaded.source_pieces,
            sentence_style=loaded.sentence_style.to_dict(),
            source_words=loaded.source_words.to_list(),
            **vmap,
        )
    return Path(out_dir)
