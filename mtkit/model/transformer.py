"""The Transformer encoder-decoder (Vaswani et al., 2017) with an incremental decoding API.

``encode`` runs the encoder once per source batch; ``decode`` is the teacher-forced pass used in
training; ``start_state`` + ``decode_step`` decode one token at a time: each decoder layer
keeps its own state (:mod:`mtkit.model.state`), caching its self-attention keys/values and its
cross-attention keys/values, computed once per source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import Tensor, nn
from torch.nn import functional as F

from mtkit.config import MODEL_PRESETS, ModelConfig
from mtkit.data.tokenizer import PAD_ID
from mtkit.errors import MtkitError
from mtkit.model.layers import (
    CrossAttention,
    FeedForward,
    Residual,
    SelfAttention,
    sinusoidal_positions,
)
from mtkit.model.state import DecoderState, LayerState, SourceCache


@dataclass
class EncoderOut:
    memory: Tensor  # (B, S, D)
    src_keep: Tensor | None  # (B, 1, 1, S) bool, True at real tokens; None when nothing is padded


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attn = SelfAttention(cfg.d_model, cfg.heads, cfg.attention_dropout)
        self.attn_res = Residual(cfg.d_model, cfg.dropout, cfg.pre_norm)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_dim, cfg.activation_dropout)
        self.ffn_res = Residual(cfg.d_model, cfg.dropout, cfg.pre_norm)

    def forward(self, x: Tensor, keep: Tensor | None) -> Tensor:
        x = self.attn_res.after(x, self.attn(self.attn_res.before(x), keep))
        return self.ffn_res.after(x, self.ffn(self.ffn_res.before(x)))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = SelfAttention(cfg.d_model, cfg.heads, cfg.attention_dropout)
        self.self_res = Residual(cfg.d_model, cfg.dropout, cfg.pre_norm)
        self.cross_attn = CrossAttention(cfg.d_model, cfg.heads, cfg.attention_dropout)
        self.cross_res = Residual(cfg.d_model, cfg.dropout, cfg.pre_norm)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_dim, cfg.activation_dropout)
        self.ffn_res = Residual(cfg.d_model, cfg.dropout, cfg.pre_norm)

    def forward(self, x: Tensor, source: SourceCache, src_keep: Tensor | None) -> Tensor:
        x = self.self_res.after(x, self.self_attn(self.self_res.before(x), causal=True))
        return self._rest(x, source, src_keep)

    def start(self, memory: Tensor, max_len: int) -> LayerState:
        """This layer's empty decoding state over an encoder memory (B, S, D)."""
        own = self.self_attn.start(memory, memory.shape[0], max_len)
        return LayerState(own, self.cross_attn.memory_kv(memory))

    def step(self, x: Tensor, state: LayerState, src_keep: Tensor | None, group: int) -> Tensor:
        """x (R, 1, D): one step of R rows; the rest of the layer works per position, so each
        source's ``group`` rows go through it as positions of one (R / group, group, D) batch
        row, which cross-attends to that source's keys/values once."""
        x = self.self_res.after(x, self.self_attn.step(self.self_res.before(x), state.own))
        r = x.shape[0]
        x = self._rest(x.view(r // group, group, x.shape[-1]), state.source, src_keep)
        return x.view(r, 1, x.shape[-1])

    def _rest(self, x: Tensor, source: SourceCache, src_keep: Tensor | None) -> Tensor:
        y = self.cross_attn(self.cross_res.before(x), source.k, source.v, src_keep)
        x = self.cross_res.after(x, y)
        return self.ffn_res.after(x, self.ffn(self.ffn_res.before(x)))


class Transformer(nn.Module):
    """Encoder-decoder with scaled, optionally shared embeddings and a tied output projection."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        if cfg.d_model % cfg.heads:
            raise MtkitError(f"d_model ({cfg.d_model}) must be divisible by heads ({cfg.heads})")
        if cfg.share_all_embeddings and cfg.src_vocab_size != cfg.tgt_vocab_size:
            raise MtkitError("share_all_embeddings needs one joint vocabulary for both languages")
        self.cfg = cfg
        self.embed_scale = math.sqrt(cfg.d_model)
        self.src_embed = nn.Embedding(cfg.src_vocab_size, cfg.d_model, padding_idx=PAD_ID)
        if cfg.share_all_embeddings:
            self.tgt_embed = self.src_embed
        else:
            self.tgt_embed = nn.Embedding(cfg.tgt_vocab_size, cfg.d_model, padding_idx=PAD_ID)
        self.output = None
        if not (cfg.tie_output or cfg.share_all_embeddings):
            self.output = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, bias=False)
        self.register_buffer(
            "positions", sinusoidal_positions(cfg.max_positions, cfg.d_model), persistent=False
        )
        self.embed_dropout = nn.Dropout(cfg.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if cfg.pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if cfg.pre_norm else nn.Identity()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform linear layers, N(0, D^-1/2) embeddings with a zero padding row."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        shared = self.tgt_embed is self.src_embed
        for embed in [self.src_embed] if shared else [self.src_embed, self.tgt_embed]:  # in order
            nn.init.normal_(embed.weight, mean=0.0, std=self.cfg.d_model**-0.5)
            nn.init.zeros_(embed.weight[PAD_ID])

    def _embed(self, embed: nn.Embedding, tokens: Tensor, offset: int = 0) -> Tensor:
        t = tokens.shape[1]
        if offset + t > self.cfg.max_positions:
            raise MtkitError(
                f"sequence of {offset + t} tokens exceeds max_positions={self.cfg.max_positions}"
            )
        x = embed(tokens) * self.embed_scale + self.positions[offset : offset + t]
        return self.embed_dropout(x)

    def encode(self, src: Tensor) -> EncoderOut:
        """src (B, S) token ids, right-padded with PAD_ID."""
        pad = src.eq(PAD_ID)
        keep = (~pad)[:, None, None, :] if bool(pad.any()) else None
        x = self._embed(self.src_embed, src)
        for layer in self.encoder:
            x = layer(x, keep)
        return EncoderOut(self.encoder_norm(x), keep)

    def logits(self, x: Tensor) -> Tensor:
        if self.output is not None:
            return self.output(x)
        return F.linear(x, self.tgt_embed.weight)

    def decode(self, tgt_in: Tensor, enc: EncoderOut) -> Tensor:
        """Teacher forcing: tgt_in (B, T) = BOS + target[:-1]; returns logits (B, T, V)."""
        x = self._embed(self.tgt_embed, tgt_in)
        for layer in self.decoder:
            x = layer(x, layer.cross_attn.memory_kv(enc.memory), enc.src_keep)
        return self.logits(self.decoder_norm(x))

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        return self.decode(tgt_in, self.encode(src))

    @property
    def max_positions(self) -> int:
        return self.cfg.max_positions

    @property
    def tgt_vocab_size(self) -> int:
        return self.cfg.tgt_vocab_size

    def start_state(self, enc: EncoderOut, max_len: int) -> DecoderState:
        """An empty decoding state for up to ``max_len`` steps over this encoder output."""
        layers = [layer.start(enc.memory, max_len) for layer in self.decoder]
        return DecoderState(layers, enc.src_keep)

    def decode_step(self, tokens: Tensor, state: DecoderState) -> Tensor:
        """Feed one token per row, tokens (R,); returns next-token logits (R, V)."""
        x = self._embed(self.tgt_embed, tokens[:, None], offset=state.offset)
        for layer, layer_state in zip(self.decoder, state.layers, strict=True):
            x = layer.step(x, layer_state, state.src_keep, state.group)
        state.offset += 1
        return self.logits(self.decoder_norm(x))[:, 0]


def resolve_model_config(
    preset: str, src_vocab_size: int, tgt_vocab_size: int, overrides: dict | None = None
) -> ModelConfig:
    """The preset's dimensions, the data's vocabularies, then any explicit overrides."""
    if preset not in MODEL_PRESETS:
        raise MtkitError(f"unknown preset '{preset}' (known: {', '.join(MODEL_PRESETS)})")
    values = dict(MODEL_PRESETS[preset], src_vocab_size=src_vocab_size,
                  tgt_vocab_size=tgt_vocab_size)  # fmt: skip
    values.update(overrides or {})
    from mtkit.config import from_dict

    return from_dict(ModelConfig, values, where="model")


def build_model(cfg: ModelConfig) -> Transformer:
    return Transformer(cfg)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
