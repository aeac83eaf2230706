"""The model: :class:`ModelConfig` (its variants included) and the named presets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class ModelConfig:
    """Transformer encoder-decoder (Vaswani et al., 2017)."""

    src_vocab_size: int = 8000
    tgt_vocab_size: int = 8000
    d_model: int = 256
    ffn_dim: int = 1024
    heads: int = 4
    encoder_layers: int = 3
    decoder_layers: int = 3
    dropout: float = 0.1
    attention_dropout: float = 0.1
    activation_dropout: float = 0.0
    pre_norm: bool = False  # False: post-LN as in the paper; True: pre-LN with final norms
    tie_output: bool = True  # target embedding == output projection
    share_all_embeddings: bool = False  # source == target == output (joint vocabulary)
    max_positions: int = 1024
    # variants (issue 12); the defaults are the model above, so every older checkpoint loads
    norm: str = "layernorm"  # layernorm | rmsnorm (Zhang & Sennrich 2019)
    norm_eps: float = 1e-5
    positions: str = "sinusoidal"  # sinusoidal | learned | relative | rope | alibi
    max_relative_position: int = 16  # positions=relative: clip distance k (Shaw et al. 2018)
    kv_heads: int = 0  # key/value heads: 0 = heads; 1 = multi-query; else grouped-query
    ffn_activation: str = "relu"  # relu | gelu | silu | swiglu | geglu (gated: hidden 2/3 ffn_dim)
    bias: bool = True  # False: no biases in linear layers and norms
    decoder_self_attention: str = "attention"  # attention | average (Zhang et al. 2018)
    share_layers: bool = False  # one encoder and one decoder layer applied *_layers times
    # imported models (issue 15: Marian/OPUS-MT); the defaults are mtkit's own model
    scale_embedding: bool = True  # embeddings x sqrt(d_model); False: x 1 (Marian's option)
    output_bias: bool = False  # a fixed bias on the output logits (Marian's final_logits_bias)


_SMALL: dict[str, Any] = dict(
    d_model=256, ffn_dim=1024, heads=4, encoder_layers=3, decoder_layers=3, dropout=0.1
)
# the small model with what the issue-13 ablation found to help at the make-demo budget:
# pre-LN (Xiong et al. 2020) and rotary positions (Su et al. 2021)
_SMALL_MODERN: dict[str, Any] = dict(_SMALL, pre_norm=True, positions="rope")
# students for sequence-level distillation (Kim & Rush 2016; recipes/multi30k `make student`):
# the deep-shallow shape (Kasai et al. 2021), 6 encoder layers and 2 decoder layers at width 256,
# pre-LN, meant for greedy decoding (the recipe passes --beam 1): the decoder's steps are the slow
# part, and a student trained on its teacher's beam output loses little without a beam
_STUDENT: dict[str, Any] = dict(_SMALL, encoder_layers=6, decoder_layers=2, pre_norm=True)

MODEL_PRESETS: dict[str, dict[str, Any]] = {
    "transformer-small": _SMALL,
    "transformer-base": dict(
        d_model=512, ffn_dim=2048, heads=8, encoder_layers=6, decoder_layers=6, dropout=0.1
    ),
    "transformer-big": dict(
        d_model=1024, ffn_dim=4096, heads=16, encoder_layers=6, decoder_layers=6, dropout=0.3
    ),
    # Kasai et al. 2021, "Deep Encoder, Shallow Decoder": the decoder's steps are the slow part
    "transformer-deep-shallow": dict(_SMALL, encoder_layers=6, decoder_layers=1),
    "transformer-small-modern": _SMALL_MODERN,
    # the speed preset: the modern model with multi-query attention (Shazeer 2019), which the
    # ablation found 1.35x faster at beam 5 with a quarter of the decoding state, BLEU no lower
    "transformer-small-modern-mqa": dict(_SMALL_MODERN, kv_heads=1),
    # standard self-attention with rotary positions: exports to CTranslate2
    "transformer-tiny-student": dict(_STUDENT, positions="rope"),
    # the average attention network in the decoder (Zhang et al. 2018), O(1) state per step:
    # mtkit's own engine only (CTranslate2 has no such layer); sinusoidal positions (AAN needs them)
    "transformer-tiny-student-aan": dict(_STUDENT, decoder_self_attention="average"),
}
