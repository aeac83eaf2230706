"""The one place where a :class:`~mtkit.config.ModelConfig`'s names become modules.

``ModelParts(cfg)`` builds each part a layer is assembled from (a norm, a residual connection
around a sublayer, a feed-forward network, an attention-time position scheme, attentions); the
layers receive built parts and never read the config. Which part each switch changes:

- ``norm``, ``norm_eps``: every norm (:func:`mtkit.model.norms.build_norm`);
- ``pre_norm``: the residual connection, :class:`PreNormResidual` or :class:`Residual`;
- ``positions``: sinusoidal and learned are added to the embeddings
  (:meth:`ModelParts.embedding_positions`); relative, rope and alibi act inside self-attention
  of both sides (:meth:`ModelParts.attention_positions`); cross-attention has none;
- ``kv_heads``: key/value heads of self- and cross-attention;
- ``ffn_activation``: :class:`mtkit.model.feedforward.FeedForward`;
- ``bias``: biases of every linear layer and LayerNorm (RMSNorm has none);
- ``decoder_self_attention``: causal self-attention or the average attention network.

``share_layers`` is the Transformer's (:mod:`mtkit.model.transformer`): it builds one layer
per side instead of one per depth. :func:`check_model_config` refuses names and combinations
no model is built from, before anything is built.

State-dict names (what :mod:`mtkit.model.weights` reads and writes; exporters and importers see
its descriptions, never these names), per layer ``encoder.N.attn`` / ``decoder.N.self_attn``
for self-attention and ``decoder.N.cross_attn`` for cross-attention; the default keeps its names:

- ``kv_heads`` < ``heads``: self-attention ``q`` (D -> D) and ``kv`` (D -> 2 Hkv Dh, keys then
  values) instead of the fused ``qkv``; cross-attention keeps ``q``/``kv``/``out`` with ``kv``
  D -> 2 Hkv Dh. Query head h reads key/value head h // (H / Hkv).
- gated ``ffn_activation``: ``ffn.gate`` (the activated half) beside ``ffn.fc1``/``ffn.fc2``,
  hidden width ``gated_hidden_size(ffn_dim)``.
- ``learned``: ``src_positions.table.weight`` and ``tgt_positions.table.weight``
  (max_positions, D); ``relative``: ``<attention>.positions.keys.weight`` and ``.values.weight``
  (2k + 1, Dh) in each self-attention; sinusoidal, rope and alibi have no parameters.
- ``average``: ``decoder.N.self_attn.ffn.fc1``/``ffn.fc2`` and ``decoder.N.self_attn.gate``
  (2D -> 2D, input gate rows then forget gate rows) instead of ``qkv``/``out``.
- ``share_layers``: ``encoder.0.*`` and ``decoder.0.*`` only.
- ``bias=False``: no ``*.bias`` at all; ``rmsnorm``: norms have ``weight`` only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from torch import nn

from mtkit.config import ModelConfig
from mtkit.errors import MtkitError
from mtkit.model.average_attention import AverageAttention
from mtkit.model.feedforward import ACTIVATIONS, FeedForward
from mtkit.model.layers import CrossAttention, PreNormResidual, Residual, SelfAttention
from mtkit.model.norms import NORMS, build_norm
from mtkit.model.positions import (
    ALiBi,
    AttentionPositions,
    LearnedPositions,
    Rotary,
    ShawRelative,
    SinusoidalPositions,
)

EMBEDDING_POSITIONS = ("sinusoidal", "learned")  # added to the token embeddings
ATTENTION_POSITIONS = ("relative", "rope", "alibi")  # inside self-attention of both sides
POSITIONS = EMBEDDING_POSITIONS + ATTENTION_POSITIONS
DECODER_SELF_ATTENTIONS = ("attention", "average")


def _one_of(name: str, value: str, known: tuple[str, ...]) -> tuple[bool, str]:
    return value in known, f"model.{name} must be one of {', '.join(known)}, got {value!r}"


def check_model_config(cfg: ModelConfig) -> None:
    """Refuse values and combinations no model is built from, in one line naming the fields.

    Called where a model config becomes final (``mtkit train``, before anything runs) and by
    ``build_model``, so a checkpoint with an impossible config is refused as well.
    """
    head_dim = cfg.d_model // cfg.heads if cfg.heads > 0 else 0
    rules = [
        (
            cfg.heads > 0 and cfg.d_model > 0 and cfg.d_model % cfg.heads == 0,
            f"model.d_model={cfg.d_model} must be divisible by model.heads={cfg.heads}",
        ),
        (
            cfg.src_vocab_size == cfg.tgt_vocab_size or not cfg.share_all_embeddings,
            f"model.share_all_embeddings needs one joint vocabulary: model.src_vocab_size="
            f"{cfg.src_vocab_size} differs from model.tgt_vocab_size={cfg.tgt_vocab_size}",
        ),
        _one_of("norm", cfg.norm, NORMS),
        (cfg.norm_eps > 0, f"model.norm_eps must be > 0, got {cfg.norm_eps}"),
        _one_of("positions", cfg.positions, POSITIONS),
        (
            cfg.max_relative_position >= 1,
            f"model.max_relative_position must be >= 1, got {cfg.max_relative_position}",
        ),
        (cfg.kv_heads >= 0, f"model.kv_heads must be >= 0 (0: model.heads), got {cfg.kv_heads}"),
        (
            cfg.kv_heads == 0 or cfg.heads % cfg.kv_heads == 0,
            f"model.kv_heads={cfg.kv_heads} must divide model.heads={cfg.heads}",
        ),
        _one_of("ffn_activation", cfg.ffn_activation, tuple(ACTIVATIONS)),
        _one_of("decoder_self_attention", cfg.decoder_self_attention, DECODER_SELF_ATTENTIONS),
        (
            cfg.positions != "rope" or head_dim % 2 == 0,
            f"model.positions=rope needs an even head width, but model.d_model={cfg.d_model} / "
            f"model.heads={cfg.heads} = {head_dim}",
        ),
        (
            cfg.decoder_self_attention != "average" or cfg.positions not in ATTENTION_POSITIONS,
            f"model.decoder_self_attention=average has no attention scores for model.positions="
            f"{cfg.positions} to act on: use sinusoidal or learned positions",
        ),
    ]
    for ok, message in rules:
        if not ok:
            raise MtkitError(message)


M = TypeVar("M", bound=nn.Module)


class ModelParts:
    """Factories for the parts of one model; parameter-free position schemes (sinusoidal,
    rotary, ALiBi, plain attention) are built once and shared by every layer that uses them."""

    def __init__(self, cfg: ModelConfig) -> None:
        self.cfg = cfg
        self.head_dim = cfg.d_model // cfg.heads
        self.kv_heads = cfg.kv_heads or cfg.heads
        self._shared: dict[str, nn.Module] = {}

    def norm(self) -> nn.Module:
        """A norm over D features; LayerNorm keeps its bias unless ``bias`` is off."""
        cfg = self.cfg
        return build_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias and cfg.norm == "layernorm")

    def residual(self) -> Residual:
        """The residual connection around one sublayer, with its own norm."""
        kind = PreNormResidual if self.cfg.pre_norm else Residual
        return kind(self.norm(), self.cfg.dropout)

    def feed_forward(self) -> FeedForward:
        cfg = self.cfg
        return FeedForward(
            cfg.d_model, cfg.ffn_dim, cfg.ffn_activation, cfg.bias, cfg.activation_dropout
        )

    def embedding_positions(self) -> tuple[nn.Module | None, nn.Module | None]:
        """(source, target) position modules added to the embeddings: one shared sinusoidal
        table, a learned table per side, or none (the scheme acts inside attention)."""
        cfg = self.cfg
        if cfg.positions == "sinusoidal":
            table = self._once(
                "sinusoidal", lambda: SinusoidalPositions(cfg.max_positions, cfg.d_model)
            )
            return table, table
        if cfg.positions == "learned":
            return (
                LearnedPositions(cfg.max_positions, cfg.d_model),
                LearnedPositions(cfg.max_positions, cfg.d_model),
            )
        return None, None

    def attention_positions(self) -> AttentionPositions:
        """The position scheme of one self-attention: Shaw et al.'s tables are per layer."""
        cfg = self.cfg
        if cfg.positions == "relative":
            return ShawRelative(self.head_dim, cfg.max_relative_position)
        if cfg.positions == "rope":
            return self._once("rope", lambda: Rotary(self.head_dim, cfg.max_positions))
        if cfg.positions == "alibi":
            return self._once("alibi", lambda: ALiBi(cfg.heads))
        return self._once("plain", AttentionPositions)

    def self_attention(self, causal: bool = False) -> SelfAttention:
        cfg = self.cfg
        return SelfAttention(
            cfg.d_model,
            cfg.heads,
            self.kv_heads,
            cfg.attention_dropout,
            cfg.bias,
            self.attention_positions(),
            causal,
        )

    def decoder_self_attention(self) -> SelfAttention | AverageAttention:
        """Causal self-attention, or the average attention network (Zhang et al., 2018) with
        its FFN (``ffn_dim``, ReLU) and gate."""
        cfg = self.cfg
        if cfg.decoder_self_attention == "average":
            return AverageAttention(cfg.d_model, cfg.ffn_dim, cfg.activation_dropout, cfg.bias)
        return self.self_attention(causal=True)

    def cross_attention(self) -> CrossAttention:
        cfg = self.cfg
        return CrossAttention(
            cfg.d_model, cfg.heads, self.kv_heads, cfg.attention_dropout, cfg.bias
        )

    def _once(self, name: str, build: Callable[[], M]) -> M:
        """The part ``name``, built on first use."""
        if name not in self._shared:
            self._shared[name] = build()
        return self._shared[name]  # type: ignore[return-value]
