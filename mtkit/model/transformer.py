"""The Transformer encoder-decoder (Vaswani et al., 2017) with an incremental decoding API.

``encode`` runs the encoder once per source batch; ``decode`` is the teacher-forced pass used in
training; ``start_state`` + ``decode_step`` decode one token at a time (``decode_steps``
several, for speculative decoding, and ``DecoderState.truncate`` rolls them back): each decoder
layer keeps its own state (:mod:`mtkit.model.state`), caching its self-attention keys/values (or the
average attention's running sum) and its cross-attention keys/values, computed once per source.

The variants of :class:`~mtkit.config.ModelConfig` (norms, positions, key/value heads,
activations, biases, average attention) arrive as built parts (:mod:`mtkit.model.builders`);
``share_layers`` stores one layer per side and applies it at every depth (Universal Transformer
weight sharing, Dehghani et al., 2019, without adaptive halting): its parameters are
``encoder.0.*`` and ``decoder.0.*``, and each application keeps its own decoding state.

Two switches exist for imported Marian models (``mtkit import``): ``scale_embedding: false``
(embeddings not multiplied by sqrt(d_model)) and ``output_bias`` (a fixed buffer
``output_bias`` (V,) added to the logits, Marian's ``final_logits_bias``; absent by default, so
default models keep their state dict). ``special_ids`` (:class:`~mtkit.data.tokenizer.SpecialIds`)
name the padding id the encoder masks and the ids the search starts from, ends at and bans.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from mtkit.config import MODEL_PRESETS, ModelConfig
from mtkit.data.tokenizer import DEFAULT_SPECIAL_IDS, SpecialIds
from mtkit.errors import MtkitError
from mtkit.model.average_attention import AverageAttention
from mtkit.model.builders import ModelParts, check_model_config
from mtkit.model.dropout import Dropout
from mtkit.model.feedforward import FeedForward
from mtkit.model.layers import CrossAttention, Residual, SelfAttention
from mtkit.model.state import AttentionHistory, DecoderState, LayerState, SourceCache


@dataclass
class EncoderOut:
    memory: Tensor  # (B, S, D)
    src_keep: Tensor | None  # (B, 1, 1, S) bool, True at real tokens; None when nothing is padded


class EncoderLayer(nn.Module):
    def __init__(
        self, attn: SelfAttention, attn_res: Residual, ffn: FeedForward, ffn_res: Residual
    ) -> None:
        super().__init__()
        self.attn, self.attn_res = attn, attn_res
        self.ffn, self.ffn_res = ffn, ffn_res

    def forward(self, x: Tensor, keep: Tensor | None) -> Tensor:
        x = self.attn_res(x, lambda h: self.attn(h, keep))
        return self.ffn_res(x, self.ffn)


class DecoderLayer(nn.Module):
    """Causal self-attention (or average attention), cross-attention, feed-forward network."""

    def __init__(
        self,
        self_attn: SelfAttention | AverageAttention,
        self_res: Residual,
        cross_attn: CrossAttention,
        cross_res: Residual,
        ffn: FeedForward,
        ffn_res: Residual,
    ) -> None:
        super().__init__()
        self.self_attn, self.self_res = self_attn, self_res
        self.cross_attn, self.cross_res = cross_attn, cross_res
        self.ffn, self.ffn_res = ffn, ffn_res

    def forward(self, x: Tensor, source: SourceCache, src_keep: Tensor | None) -> Tensor:
        x = self.self_res(x, self.self_attn)
        return self._rest(x, source, src_keep)

    def start(self, memory: Tensor, max_len: int) -> LayerState:
        """This layer's empty decoding state over an encoder memory (B, S, D)."""
        own = self.self_attn.start(memory, memory.shape[0], max_len)
        return LayerState(own, self.cross_attn.memory_kv(memory))

    def step(
        self,
        x: Tensor,
        state: LayerState,
        src_keep: Tensor | None,
        group: int,
        history: AttentionHistory | None = None,
        joined: tuple[Tensor | None, Tensor] | None = None,
    ) -> Tensor:
        """x (R, 1, D): one step of R rows; the rest of the layer works per position, so each
        source's ``group`` rows go through it as positions of one (R / group, group, D) batch
        row, which cross-attends to that source's keys/values once. ``history``: where this
        layer's cross-attention distribution of each row is recorded (word alignments).
        ``joined``: rows at different positions, the slots each reads and its position
        (:meth:`SelfAttention.step`'s ``keep`` and ``positions``)."""
        attend = self.self_attn.step
        if joined is not None:
            keep, positions = joined
            attend = functools.partial(self.self_attn.step, keep=keep, positions=positions)
        return self.steps(x, state, src_keep, group, history, attend)

    def steps(
        self,
        x: Tensor,
        state: LayerState,
        src_keep: Tensor | None,
        group: int,
        history: AttentionHistory | None = None,
        attend: Callable | None = None,
    ) -> Tensor:
        """x (R, n, D): n positions of R rows at once (speculative decoding); as :meth:`step`,
        each source's ``group`` rows share one (R / group, group * n, D) cross-attention row.
        ``attend``: the self-attention's step function (its ``steps`` by default)."""
        attend = attend or self.self_attn.steps
        x = self.self_res(x, lambda h: attend(h, state.own))
        r, n, d = x.shape
        record = None
        if history is not None:
            record = lambda probs: history.append(probs.reshape(r, n, probs.shape[-1]))  # noqa: E731
        x = self._rest(x.reshape(r // group, group * n, d), state.source, src_keep, record)
        return x.view(r, n, d)

    def attention_probabilities(
        self, x: Tensor, source: SourceCache, src_keep: Tensor | None
    ) -> Tensor:
        """The cross-attention distribution (B, T, S) of a teacher-forced pass through this
        layer, averaged over heads (x: this layer's input)."""
        x = self.self_res(x, self.self_attn)
        found: list[Tensor] = []

        def capture(h: Tensor) -> Tensor:  # h: what the cross-attention sees (normed if pre-LN)
            found.append(self.cross_attn.probabilities(h, source.k, src_keep))
            return h

        self.cross_res(x, capture)
        return found[0]

    def _rest(
        self,
        x: Tensor,
        source: SourceCache,
        src_keep: Tensor | None,
        record: Callable[[Tensor], None] | None = None,
    ) -> Tensor:
        """Cross-attention and feed-forward; ``record`` receives the cross-attention's
        distribution (B, T, S) averaged over heads (the output is the same either way)."""
        if record is None:
            x = self.cross_res(x, lambda h: self.cross_attn(h, source.k, source.v, src_keep))
        else:

            def recorded(h: Tensor) -> Tensor:
                y, probs = self.cross_attn.with_probabilities(h, source.k, source.v, src_keep)
                record(probs)
                return y

            x = self.cross_res(x, recorded)
        return self.ffn_res(x, self.ffn)


def encoder_layer(parts: ModelParts) -> EncoderLayer:
    return EncoderLayer(
        parts.self_attention(), parts.residual(), parts.feed_forward(), parts.residual()
    )


def decoder_layer(parts: ModelParts) -> DecoderLayer:
    return DecoderLayer(
        parts.decoder_self_attention(),
        parts.residual(),
        parts.cross_attention(),
        parts.residual(),
        parts.feed_forward(),
        parts.residual(),
    )


class Transformer(nn.Module):
    """Encoder-decoder with scaled, optionally shared embeddings and a tied output projection."""

    def __init__(
        self,
        cfg: ModelConfig,
        special_ids: SpecialIds = DEFAULT_SPECIAL_IDS,
        tag_ids: tuple[int, ...] = (),
    ) -> None:
        super().__init__()
        check_model_config(cfg)
        parts = ModelParts(cfg)
        self.cfg = cfg
        self.special_ids = special_ids
        # a multilingual source vocabulary's target-language tags (mtkit.data.tags): a leading
        # tag does not count as a source piece in the decoding length limit (max_len_a)
        self.tag_ids: tuple[int, ...] = tuple(tag_ids)
        pad = special_ids.pad
        self.embed_scale = math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0
        self.src_embed = nn.Embedding(cfg.src_vocab_size, cfg.d_model, padding_idx=pad)
        if cfg.share_all_embeddings:
            self.tgt_embed = self.src_embed
        else:
            self.tgt_embed = nn.Embedding(cfg.tgt_vocab_size, cfg.d_model, padding_idx=pad)
        self.output = None
        if not (cfg.tie_output or cfg.share_all_embeddings):
            self.output = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, bias=False)
        bias = torch.zeros(cfg.tgt_vocab_size) if cfg.output_bias else None
        self.register_buffer("output_bias", bias)  # not trained (as Marian's final_logits_bias)
        self.src_positions, self.tgt_positions = parts.embedding_positions()
        self.embed_dropout = Dropout(cfg.dropout)
        stored = (1, 1) if cfg.share_layers else (cfg.encoder_layers, cfg.decoder_layers)
        self.encoder = nn.ModuleList(encoder_layer(parts) for _ in range(stored[0]))
        self.decoder = nn.ModuleList(decoder_layer(parts) for _ in range(stored[1]))
        self.encoder_norm = parts.norm() if cfg.pre_norm else nn.Identity()
        self.decoder_norm = parts.norm() if cfg.pre_norm else nn.Identity()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform linear layers, N(0, D^-1/2) embeddings with a zero padding row."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                fan_out = getattr(module, "init_fan_out", None)  # layers.init_like
                if fan_out is None:
                    nn.init.xavier_uniform_(module.weight)
                else:  # torch's xavier_uniform_ bound, computed the same way
                    bound = math.sqrt(3.0) * math.sqrt(2.0 / float(module.in_features + fan_out))
                    nn.init.uniform_(module.weight, -bound, bound)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        shared = self.tgt_embed is self.src_embed
        for embed in [self.src_embed] if shared else [self.src_embed, self.tgt_embed]:  # in order
            nn.init.normal_(embed.weight, mean=0.0, std=self.cfg.d_model**-0.5)
            nn.init.zeros_(embed.weight[self.special_ids.pad])

    def encoder_stack(self) -> list[EncoderLayer]:
        """The encoder's layers in order of application (one layer repeated with
        ``share_layers``)."""
        return [self.encoder[i % len(self.encoder)] for i in range(self.cfg.encoder_layers)]

    def decoder_stack(self) -> list[DecoderLayer]:
        """The decoder's layers in order of application."""
        return [self.decoder[i % len(self.decoder)] for i in range(self.cfg.decoder_layers)]

    def _embed(
        self, embed: nn.Embedding, positions: nn.Module | None, tokens: Tensor, offset: int = 0
    ) -> Tensor:
        t = tokens.shape[1]
        if offset + t > self.cfg.max_positions:
            raise MtkitError(
                f"sequence of {offset + t} tokens exceeds max_positions={self.cfg.max_positions}"
            )
        x = embed(tokens) * self.embed_scale
        if positions is not None:
            x = x + positions(t, offset)
        return self.embed_dropout(x)

    def encode(self, src: Tensor) -> EncoderOut:
        """src (B, S) token ids, right-padded with ``special_ids.pad``."""
        pad = src.eq(self.special_ids.pad)
        traced = torch.compiler.is_compiling()  # a compiled graph always masks (no branch)
        keep = (~pad)[:, None, None, :] if traced or bool(pad.any()) else None
        x = self._embed(self.src_embed, self.src_positions, src)
        for layer in self.encoder_stack():
            x = layer(x, keep)
        return EncoderOut(self.encoder_norm(x), keep)

    def logits(self, x: Tensor) -> Tensor:
        out = self.output(x) if self.output is not None else F.linear(x, self.tgt_embed.weight)
        return out if self.output_bias is None else out + self.output_bias

    @property
    def output_weight(self) -> Tensor:
        """The output projection's (V_tgt, D) weight: its own layer's, or the tied embedding."""
        return self.tgt_embed.weight if self.output is None else self.output.weight

    def decode(self, tgt_in: Tensor, enc: EncoderOut, project: bool = True) -> Tensor:
        """Teacher forcing: tgt_in (B, T) = BOS + target[:-1]; returns logits (B, T, V), or
        with ``project`` False the final hidden states (B, T, D) that :meth:`logits` projects
        (the training loss projects them itself, a block of rows at a time)."""
        x = self._embed(self.tgt_embed, self.tgt_positions, tgt_in)
        for layer in self.decoder_stack():
            x = layer(x, layer.cross_attn.memory_kv(enc.memory), enc.src_keep)
        x = self.decoder_norm(x)
        return self.logits(x) if project else x

    def forward(self, src: Tensor, tgt_in: Tensor, project: bool = True) -> Tensor:
        return self.decode(tgt_in, self.encode(src), project)

    def cross_attention(
        self, src: Tensor, tgt_in: Tensor, layer: int, enc: EncoderOut | None = None
    ) -> Tensor:
        """Teacher forcing up to decoder layer ``layer`` (0-based): its cross-attention
        distribution (B, T, S) averaged over heads, row t the step that predicts target token t
        (word alignments, as Bergamot and OPUS-MT read them). Layers above are not run. ``enc``:
        ``encode(src)`` where the caller has it already."""
        enc = enc if enc is not None else self.encode(src)
        x = self._embed(self.tgt_embed, self.tgt_positions, tgt_in)
        stack = self.decoder_stack()
        for below in stack[:layer]:
            x = below(x, below.cross_attn.memory_kv(enc.memory), enc.src_keep)
        chosen = stack[layer]
        return chosen.attention_probabilities(
            x, chosen.cross_attn.memory_kv(enc.memory), enc.src_keep
        )

    @property
    def max_positions(self) -> int:
        return self.cfg.max_positions

    @property
    def tgt_vocab_size(self) -> int:
        return self.cfg.tgt_vocab_size

    def start_state(
        self, enc: EncoderOut, max_len: int, alignment_layer: int | None = None
    ) -> DecoderState:
        """An empty decoding state for up to ``max_len`` steps over this encoder output; with
        ``alignment_layer`` (0-based), it records that layer's cross-attention at each step
        (:meth:`DecoderState.attended`: what :meth:`cross_attention` gives, without a pass)."""
        layers = [layer.start(enc.memory, max_len) for layer in self.decoder_stack()]
        history = None
        if alignment_layer is not None:
            if not 0 <= alignment_layer < len(layers):
                raise MtkitError(
                    f"alignment layer {alignment_layer}: the model has {len(layers)} decoder layers"
                )
            history = AttentionHistory(alignment_layer, max_len)
        return DecoderState(layers, enc.src_keep, attention=history)

    def decode_step(self, tokens: Tensor, state: DecoderState) -> Tensor:
        """Feed one token per row, tokens (R,); returns next-token logits (R, V)."""
        return self.logits(self.decode_hidden(tokens, state))[:, 0]

    def decode_hidden(self, tokens: Tensor, state: DecoderState) -> Tensor:
        """:meth:`decode_step` up to the output projection: the final decoder states (R, 1, D)
        that :meth:`logits` projects (a shortlist projects them onto some rows only)."""
        positions = state.positions()
        if positions is None:
            x = self._embed(self.tgt_embed, self.tgt_positions, tokens[:, None], state.offset)
            attend = None
        else:  # rows that joined a running decode, each at its own position
            x = self.tgt_embed(tokens[:, None]) * self.embed_scale
            if self.tgt_positions is not None:
                x = x + self.tgt_positions.at(positions)[:, None]
            x = self.embed_dropout(x)
            attend = (state.self_keep(), positions)
        for i, (layer, layer_state) in enumerate(
            zip(self.decoder_stack(), state.layers, strict=True)
        ):
            x = layer.step(x, layer_state, state.src_keep, state.group, _history(state, i), attend)
        state.offset += 1
        return self.decoder_norm(x)

    @property
    def joinable(self) -> bool:
        """Whether rows may join its running decode (:meth:`DecoderState.join`): every
        decoder layer keeps a key/value cache (the average attention's running sum does not);
        a compiled step's pointer caches take them too."""
        return all(isinstance(layer.self_attn, SelfAttention) for layer in self.decoder_stack())

    def decode_steps(self, tokens: Tensor, state: DecoderState) -> Tensor:
        """Feed n tokens per row at once, tokens (R, n) at positions offset..offset+n-1;
        returns the logits after each (R, n, V), as n calls of :meth:`decode_step` would (to
        float rounding). Speculative decoding checks proposed tokens with it, then rolls the
        state back to the accepted ones (:meth:`DecoderState.truncate`)."""
        return self.logits(self.decode_steps_hidden(tokens, state))

    def decode_steps_hidden(self, tokens: Tensor, state: DecoderState) -> Tensor:
        """:meth:`decode_steps` up to the output projection: the final decoder states
        (R, n, D) (a draft with a shortlist projects them onto some rows only)."""
        x = self._embed(self.tgt_embed, self.tgt_positions, tokens, state.offset)
        for i, (layer, layer_state) in enumerate(
            zip(self.decoder_stack(), state.layers, strict=True)
        ):
            x = layer.steps(x, layer_state, state.src_keep, state.group, _history(state, i))
        state.offset += tokens.shape[1]
        return self.decoder_norm(x)


def _history(state: DecoderState, layer: int) -> AttentionHistory | None:
    """The state's attention history if it records decoder layer ``layer``."""
    history = state.attention
    return history if history is not None and history.layer == layer else None


def resolve_model_config(
    preset: str, src_vocab_size: int, tgt_vocab_size: int, overrides: dict | None = None
) -> ModelConfig:
    """The preset's dimensions, the data's vocabularies, then any explicit overrides; not yet
    checked as a whole (:func:`mtkit.model.builders.check_model_config` checks the final one)."""
    if preset not in MODEL_PRESETS:
        raise MtkitError(f"unknown preset '{preset}' (known: {', '.join(MODEL_PRESETS)})")
    values = dict(
        MODEL_PRESETS[preset], src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size
    )
    values.update(overrides or {})
    from mtkit.config import from_dict

    return from_dict(ModelConfig, values, where="model")


def build_model(
    cfg: ModelConfig, special_ids: SpecialIds = DEFAULT_SPECIAL_IDS, tag_ids: tuple[int, ...] = ()
) -> Transformer:
    """The model of ``cfg``, checked first (:func:`mtkit.model.builders.check_model_config`)."""
    return Transformer(cfg, special_ids, tag_ids)


def count_parameters(model: nn.Module) -> int:
    """Distinct parameters (shared embeddings and shared layers counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
