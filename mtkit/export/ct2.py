"""Export to CTranslate2 (OpenNMT) through its model specification API, and decode with it.

The spec is filled straight from our weights, no Hugging Face detour: CTranslate2's
``TransformerSpec`` has the same layout as mtkit's model (fused [q; k; v] self-attention and
[k; v] cross-attention projections, sqrt(d_model) embedding scale, an explicit position table, post-
or pre-LN with final norms), so pre-LN models export too. Its Marian loader would not fit: it
starts the decoder from a zero embedding and drops the last vocabulary entry.

Decoding differences from ``mtkit translate`` (documented, not hidden):

- length penalty: CTranslate2 divides a finished hypothesis' log-probability by len**lenpen, as
  mtkit's 'fairseq' style does; with ``return_end_token`` len counts EOS, as ours. There is no
  'gnmt' style, so that is refused.
- length limit: ``max_decoding_length`` is one bound per call, so lines are grouped by their bound
  (max_len_a * source length + max_len_b); a hypothesis that reaches it stops without EOS where
  mtkit forces EOS: same tokens for greedy search, a slightly different beam score.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mtkit import __version__
from mtkit.config import ModelConfig, TranslateConfig
from mtkit.data.tokenizer import EOS_ID, Tokenizer
from mtkit.errors import MtkitError
from mtkit.export import require, staged_dir

QUANTIZATIONS = ("float32", "int8_float32", "int8", "float16")
METADATA = "mtkit.json"
LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, which mtkit's layers use


def _ct2() -> Any:
    return require("ctranslate2", "ct2", "CTranslate2 export and decoding")


def _linear(spec: Any, weights: dict[str, np.ndarray], name: str) -> None:
    spec.weight = weights[f"{name}.weight"]
    spec.bias = weights[f"{name}.bias"]


def _norm(spec: Any, weights: dict[str, np.ndarray], name: str) -> None:
    spec.gamma = weights[f"{name}.weight"]
    spec.beta = weights[f"{name}.bias"]


def ct2_spec(model: Any, src: Tokenizer, tgt: Tokenizer) -> Any:
    """A CTranslate2 TransformerSpec holding ``model``'s weights and our vocabularies."""
    _ct2()
    from ctranslate2.specs import common_spec, transformer_spec

    cfg: ModelConfig = model.cfg
    w = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
    positions = model.positions.detach().float().cpu().numpy()
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
    from mtkit.training.checkpoint import load_for_inference

    if quantization not in QUANTIZATIONS:
        raise MtkitError(
            f"unknown quantization '{quantization}' (known: {', '.join(QUANTIZATIONS)})"
        )
    loaded = load_for_inference(checkpoint)
    ct2 = _ct2()
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


# ---------------------------------------------------------------------------------------------
# Decoding


def max_target_len(src_len: int, config: TranslateConfig, cap: int) -> int:
    """Most target tokens before EOS for a source of ``src_len`` pieces (EOS excluded), as in
    ``mtkit.decoding.beam.max_target_lengths``: floor(a * len + b) within [min_len, cap]."""
    return min(cap, max(config.min_len, math.floor(config.max_len_a * src_len + config.max_len_b)))


def _check_supported(config: TranslateConfig) -> None:
    from mtkit.decoding.search import check_config

    check_config(config)  # the same option checks as mtkit's own search
    if config.lenpen_style != "fairseq":
        raise MtkitError(
            f"lenpen_style={config.lenpen_style!r} is not available with CTranslate2, which "
            "normalizes by len**lenpen only (use 'fairseq')"
        )
    if config.unk_penalty:
        raise MtkitError("unk_penalty is not available with CTranslate2")
    if config.nbest > 1:
        raise MtkitError("nbest > 1 is not available with the ctranslate2 engine (one line out)")


def _device(config: TranslateConfig, ct2: Any) -> tuple[str, int]:
    device = config.device
    if device == "auto":
        return ("cuda" if ct2.get_cuda_device_count() > 0 else "cpu"), 0
    if device.startswith("cuda:"):
        return "cuda", int(device.split(":", 1)[1])
    if device in ("cpu", "cuda"):
        return device, 0
    raise MtkitError(f"unknown device '{device}' (auto, cpu, cuda, cuda:N)")


def _compute_type(config: TranslateConfig) -> str:
    """'default' keeps the exported quantization; --quantize/--dtype ask for another one."""
    floats = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
    if config.dtype not in floats:
        raise MtkitError(f"unknown dtype '{config.dtype}' (fp32, fp16, bf16)")
    if config.quantize == "int8":
        return "int8" if config.dtype == "fp32" else f"int8_{floats[config.dtype]}"
    if config.quantize:
        raise MtkitError(f"unknown quantize '{config.quantize}' ('' or int8)")
    return "default" if config.dtype == "fp32" else floats[config.dtype]


def load_ct2_translator(model_dir: str | Path, config: TranslateConfig) -> tuple[Any, dict]:
    """The CTranslate2 translator for an exported directory and its ``mtkit.json`` metadata."""
    ct2 = _ct2()
    model_dir = Path(model_dir)
    if not (model_dir / "model.bin").is_file():
        raise MtkitError(f"{model_dir}: not a CTranslate2 model directory (no model.bin)")
    meta_path = model_dir / METADATA
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    device, index = _device(config, ct2)
    threads = config.threads or os.cpu_count() or 1
    try:
        translator = ct2.Translator(str(model_dir), device=device, device_index=index,
                                    compute_type=_compute_type(config),
                                    inter_threads=1, intra_threads=threads)  # fmt: skip
    except (RuntimeError, ValueError) as err:
        raise MtkitError(f"{model_dir}: cannot load CTranslate2 model ({err})") from None
    return translator, meta


@dataclass
class Ct2Model:
    """A loaded CTranslate2 export with its tokenizers and the search configuration."""

    translator: Any
    src: Tokenizer
    tgt: Tokenizer
    max_positions: int
    config: TranslateConfig


def load_ct2(model_dir: str | Path, config: TranslateConfig) -> Ct2Model:
    """Load an exported directory (model.bin, source.spm, target.spm) for ``config``."""
    _ct2()  # a missing extra is named before anything else is checked
    _check_supported(config)
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise MtkitError(f"{model_dir}: no such CTranslate2 model directory (mtkit export)")
    for name in ("source.spm", "target.spm"):
        if not (model_dir / name).is_file():
            raise MtkitError(f"{model_dir}: no {name} (export it with `mtkit export`)")
    translator, meta = load_ct2_translator(model_dir, config)
    if config.sampling:
        _ct2().set_random_seed(config.seed)
    return Ct2Model(
        translator,
        Tokenizer.from_file(model_dir / "source.spm"),
        Tokenizer.from_file(model_dir / "target.spm"),
        int(meta.get("max_positions", 1024)),
        config,
    )


def translate_lines_ct2(
    model_dir: str | Path, lines: Sequence[str], config: TranslateConfig
) -> list[str]:
    """Translate ``lines`` with an exported CTranslate2 model: one output line per input line."""
    return translate_with_ct2(load_ct2(model_dir, config), lines)


def translate_with_ct2(model: Ct2Model, lines: Sequence[str], first_number: int = 1) -> list[str]:
    """One output per line with a loaded model; empty lines (no pieces) give empty outputs.

    Sources are cut to ``max_input_tokens`` pieces (and to the model's position limit) before EOS
    is added, sorted by length and batched by tokens. CTranslate2 takes one length limit per
    call: each batch decodes up to its largest limit, and every output is then cut to its own
    line's limit (``max_len_a * pieces + max_len_b``), where mtkit would have forced EOS.
    """
    config, src, tgt = model.config, model.src, model.tgt
    cap = min(config.max_input_tokens, model.max_positions - 1)  # + EOS must fit the positions
    ids = _encode(src, lines, cap, first_number)
    bounds = [max_target_len(len(seq), config, model.max_positions - 1) for seq in ids]
    members = sorted((i for i, seq in enumerate(ids) if seq), key=lambda i: len(ids[i]))
    outputs = [""] * len(lines)
    for chunk in _token_chunks(members, [len(s) + 1 for s in ids], config.max_tokens):
        pieces = [[src.sp.IdToPiece(t) for t in ids[i]] for i in chunk]
        options = _search_options(config, max(bounds[i] for i in chunk))
        results = model.translator.translate_batch(pieces, **options)
        hyps = [
            _target_ids(tgt, r.hypotheses[0], bounds[i])
            for i, r in zip(chunk, results, strict=True)
        ]
        for i, text in zip(chunk, tgt.decode(hyps), strict=True):
            outputs[i] = text.replace("\r", " ").replace("\n", " ")
    return outputs


def _encode(src: Tokenizer, lines: Sequence[str], cap: int, first: int = 1) -> list[list[int]]:
    """Piece ids per line (no EOS), cut to ``cap`` with a warning; [] for blank lines."""
    ids = src.encode([line if line.strip() else "" for line in lines])
    for number, seq in enumerate(ids, start=first):
        if len(seq) > cap:
            print(f"mtkit translate: warning: line {number}: {len(seq)} pieces, truncated to the "
                  f"first {cap} (--max-input-tokens)", file=sys.stderr, flush=True)  # fmt: skip
    return [seq[:cap] for seq in ids]


def _target_ids(tgt: Tokenizer, pieces: list[str], bound: int) -> list[int]:
    """Piece ids up to EOS, at most ``bound`` of them (where mtkit would have forced EOS)."""
    ids = [tgt.sp.PieceToId(p) for p in pieces]
    if EOS_ID in ids:
        ids = ids[: ids.index(EOS_ID)]
    return ids[:bound]


def _search_options(config: TranslateConfig, bound: int) -> dict[str, Any]:
    """translate_batch keywords for a group of sources whose target bound is ``bound``."""
    options: dict[str, Any] = dict(
        beam_size=1 if config.sampling else config.beam,
        length_penalty=config.lenpen,
        max_decoding_length=bound + 1,  # + EOS
        min_decoding_length=config.min_len,
        max_input_length=0,  # we truncate ourselves, before EOS
        no_repeat_ngram_size=config.no_repeat_ngram,
        num_hypotheses=1,
        suppress_sequences=[["<pad>"], ["<s>"]],  # never generated by mtkit either
        return_end_token=True,  # so that len in len**lenpen counts EOS, as in mtkit
        max_batch_size=0,
    )
    if config.sampling:
        options.update(sampling_topk=config.top_k or 0, sampling_topp=config.top_p,
                       sampling_temperature=config.temperature)  # fmt: skip
    return options


def _token_chunks(members: list[int], sizes: list[int], max_tokens: int) -> list[list[int]]:
    """Split ``members`` (sorted by size) into runs whose padded size stays within max_tokens.

    >>> _token_chunks([0, 1, 2], [2, 3, 3], 6)
    [[0, 1], [2]]
    """
    chunks: list[list[int]] = [[]]
    for i in members:
        widest = max([sizes[j] for j in chunks[-1]] + [sizes[i]])
        if chunks[-1] and widest * (len(chunks[-1]) + 1) > max_tokens:
            chunks.append([])
        chunks[-1].append(i)
    return chunks
