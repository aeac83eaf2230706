"""The model's weights by role, whatever their layout in the state dict.

Converters in and out (:mod:`mtkit.export`) map another format's names to these descriptions
and never spell mtkit's state-dict paths: a parameter renamed, fused or split in the model
package changes this module only. As CTranslate2's specs (``attention_spec.py``), a variant
decides which weights exist: a bias is ``None`` without ``bias``, a norm has no bias as RMSNorm,
a feed-forward network has a ``gate`` when gated, an attention carries Shaw's tables with
``positions: relative``, a decoder layer has :class:`AverageAttentionWeights` with
``decoder_self_attention: average``.

Projections are described unfused, as (out, in) matrices: ``q`` D -> H Dh, ``k`` and ``v``
D -> Hkv Dh (Hkv < H with grouped-query attention), whatever the model fuses (self-attention's
``qkv`` with Hkv = H, ``q`` + ``kv`` otherwise; cross-attention's ``q`` + ``kv``; the average
attention's gate). ``read_weights(model)`` splits the model's tensors (views, no copies);
``state_dict_from(cfg, weights)`` fuses them back into the state dict of ``Transformer(cfg)``,
checking every name and shape; ``load_weights`` loads that into a model. Both directions refuse,
naming it, a tensor with no place (an unknown parameter, a bias the model lacks, a missing value).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from mtkit.config import ModelConfig
from mtkit.errors import MtkitError
from mtkit.model.average_attention import AverageAttention
from mtkit.model.feedforward import FeedForward
from mtkit.model.layers import CrossAttention, SelfAttention
from mtkit.model.positions import LearnedPositions, ShawRelative, sinusoidal_positions
from mtkit.model.transformer import DecoderLayer, EncoderLayer, Transformer


@dataclass
class LinearWeights:
    """y = x W^T + b: ``weight`` (out, in), ``bias`` (out,) or None."""

    weight: Tensor
    bias: Tensor | None = None


@dataclass
class NormWeights:
    """A LayerNorm's gain and bias, or an RMSNorm's (or bias-free LayerNorm's) gain alone."""

    weight: Tensor  # (D,)
    bias: Tensor | None = None


@dataclass
class RelativePositionWeights:
    """Shaw et al.'s (2018) tables a^K and a^V, (2k + 1, Dh), row r for clip(j - i, -k, k) + k."""

    keys: Tensor
    values: Tensor


@dataclass
class AttentionWeights:
    """Multi-head attention: queries ``q`` (D -> H Dh), keys ``k`` and values ``v`` (D -> Hkv Dh,
    key/value head h' in rows h' Dh..(h' + 1) Dh - 1), output ``out`` (D -> D); Shaw's tables
    in self-attention with relative positions."""

    q: LinearWeights
    k: LinearWeights
    v: LinearWeights
    out: LinearWeights
    relative: RelativePositionWeights | None = None


@dataclass
class FeedForwardWeights:
    """fc2(act(fc1 x)), or fc2(act(gate x) * fc1 x) when gated (SwiGLU, GEGLU)."""

    fc1: LinearWeights  # D -> hidden: the value ("up") half when gated
    fc2: LinearWeights  # hidden -> D
    gate: LinearWeights | None = None  # D -> hidden, the activated half


@dataclass
class AverageAttentionWeights:
    """The average attention network (Zhang et al., 2018): input and forget gates over [y; g]
    (2D -> D each) and the FFN over the average (None without it)."""

    input_gate: LinearWeights
    forget_gate: LinearWeights
    ffn: FeedForwardWeights | None = None


@dataclass
class EncoderLayerWeights:
    """Self-attention and feed-forward network, each with the norm of its residual connection
    (before the sublayer with ``pre_norm``, after the sum without)."""

    self_attention: AttentionWeights
    self_attention_norm: NormWeights
    ffn: FeedForwardWeights
    ffn_norm: NormWeights


@dataclass
class DecoderLayerWeights:
    """Causal self-attention (or average attention), cross-attention, feed-forward network."""

    self_attention: AttentionWeights | AverageAttentionWeights
    self_attention_norm: NormWeights
    cross_attention: AttentionWeights
    cross_attention_norm: NormWeights
    ffn: FeedForwardWeights
    ffn_norm: NormWeights


@dataclass
class ModelWeights:
    """A whole model. ``encoder``/``decoder`` hold one entry per depth, in order of application
    (``share_layers``: one object repeated); with ``share_all_embeddings`` both embeddings are
    one tensor. ``output`` is None when the output projection is the target embedding
    (``tie_output``); ``output_bias`` (V,) is Marian's fixed logit bias; ``src_positions``/
    ``tgt_positions`` (max_positions, D) are learned position tables (see
    :func:`embedding_positions` for the tables any model adds); ``encoder_norm``/
    ``decoder_norm`` the final norms of pre-LN models."""

    src_embedding: Tensor  # (V_src, D)
    tgt_embedding: Tensor  # (V_tgt, D)
    encoder: list[EncoderLayerWeights]
    decoder: list[DecoderLayerWeights]
    output: Tensor | None = None
    output_bias: Tensor | None = None
    src_positions: Tensor | None = None
    tgt_positions: Tensor | None = None
    encoder_norm: NormWeights | None = None
    decoder_norm: NormWeights | None = None

    @property
    def projection(self) -> Tensor:
        """The output projection's (V_tgt, D) weight: ``output``, or the target embedding."""
        return self.tgt_embedding if self.output is None else self.output


def embedding_positions(
    cfg: ModelConfig, weights: ModelWeights
) -> tuple[Tensor | None, Tensor | None]:
    """The (max_positions, D) tables added to the source and target embeddings, row t at
    position t: the sinusoidal one (computed, not a weight) or the learned ones; None for
    positions that act inside attention."""
    if cfg.positions == "sinusoidal":
        table = sinusoidal_positions(cfg.max_positions, cfg.d_model)
        return table, table
    return weights.src_positions, weights.tgt_positions


Sublayer = SelfAttention | CrossAttention | FeedForward | AverageAttention
DESCRIPTIONS: dict[type, type] = {
    SelfAttention: AttentionWeights,
    CrossAttention: AttentionWeights,
    FeedForward: FeedForwardWeights,
    AverageAttention: AverageAttentionWeights,
    EncoderLayer: EncoderLayerWeights,
    DecoderLayer: DecoderLayerWeights,
    nn.LayerNorm: NormWeights,
    nn.RMSNorm: NormWeights,
}


def _description(m: nn.Module) -> type:
    """The description class of a module, or a refusal naming a module kind not known here."""
    if type(m) not in DESCRIPTIONS:
        kind = type(m).__name__
        raise MtkitError(f"weights: mtkit/model/weights.py has no description of {kind}")
    return DESCRIPTIONS[type(m)]


def _linears(m: Sublayer) -> list[tuple[tuple[str, ...], nn.Linear | None]]:
    """The linear layers of a sublayer with the description's fields each holds, in row order
    (a fused projection holds several, of equal height); None where the variant has none."""
    if isinstance(m, AverageAttention):
        return [(("input_gate", "forget_gate"), m.gate)]
    if isinstance(m, FeedForward):
        return [(("fc1",), m.fc1), (("fc2",), m.fc2), (("gate",), m.gate)]
    if isinstance(m, SelfAttention) and m.kv_heads == m.heads:
        return [(("q", "k", "v"), m.qkv), (("out",), m.out)]
    return [(("q",), m.q), (("k", "v"), m.kv), (("out",), m.out)]


def _parts(layer: EncoderLayer | DecoderLayer) -> dict[str, nn.Module]:
    """A layer's sublayers and norms by the description's fields."""
    if isinstance(layer, EncoderLayer):
        return {
            "self_attention": layer.attn,
            "self_attention_norm": layer.attn_res.norm,
            "ffn": layer.ffn,
            "ffn_norm": layer.ffn_res.norm,
        }
    return {
        "self_attention": layer.self_attn,
        "self_attention_norm": layer.self_res.norm,
        "cross_attention": layer.cross_attn,
        "cross_attention_norm": layer.cross_res.norm,
        "ffn": layer.ffn,
        "ffn_norm": layer.ffn_res.norm,
    }


def _model_parts(model: Transformer) -> dict[str, Tensor | nn.Module | None]:
    """The model's tensors and modules by the fields of :class:`ModelWeights` (layers aside)."""

    def learned(positions: nn.Module | None) -> Tensor | None:
        return positions.table.weight if isinstance(positions, LearnedPositions) else None

    def final(norm: nn.Module) -> nn.Module | None:
        return None if isinstance(norm, nn.Identity) else norm

    return {
        "src_embedding": model.src_embed.weight,
        "tgt_embedding": model.tgt_embed.weight,
        "output": None if model.output is None else model.output.weight,
        "output_bias": model.output_bias,
        "src_positions": learned(model.src_positions),
        "tgt_positions": learned(model.tgt_positions),
        "encoder_norm": final(model.encoder_norm),
        "decoder_norm": final(model.decoder_norm),
    }


def _stacks(model: Transformer) -> dict[str, list[nn.Module]]:
    """Each side's layers, one per depth (``share_layers``: one module repeated)."""
    return {"encoder": list(model.encoder_stack()), "decoder": list(model.decoder_stack())}


# -- model -> description -------------------------------------------------------------------------


class _Reader:
    """Takes tensors out of a model and remembers which, so that none is left over."""

    def __init__(self, model: nn.Module) -> None:
        self.state = model.state_dict(keep_vars=True)
        self.taken: dict[int, Tensor] = {}  # one detached tensor per model tensor

    def take(self, tensor: Tensor | None) -> Tensor | None:
        if tensor is None:
            return None
        return self.taken.setdefault(id(tensor), tensor.detach())

    def split(self, linear: nn.Linear, parts: int) -> list[LinearWeights]:
        """A linear layer's rows cut into ``parts`` equal projections (views)."""
        weights = self.take(linear.weight).chunk(parts)
        bias = self.take(linear.bias)
        biases = [None] * parts if bias is None else bias.chunk(parts)
        return [LinearWeights(w, b) for w, b in zip(weights, biases, strict=True)]

    def read(self, m: nn.Module) -> Any:
        """The description of a layer, sublayer or norm."""
        if isinstance(m, nn.LayerNorm | nn.RMSNorm):
            return NormWeights(self.take(m.weight), self.take(getattr(m, "bias", None)))
        if isinstance(m, EncoderLayer | DecoderLayer):
            return _description(m)(**{f: self.read(p) for f, p in _parts(m).items()})
        fields: dict[str, Any] = {}
        for names, linear in _linears(m):
            if linear is not None:
                fields.update(zip(names, self.split(linear, len(names)), strict=True))
        if isinstance(m, SelfAttention) and isinstance(m.positions, ShawRelative):
            keys, values = m.positions.keys.weight, m.positions.values.weight
            fields["relative"] = RelativePositionWeights(self.take(keys), self.take(values))
        if isinstance(m, AverageAttention) and m.ffn is not None:
            fields["ffn"] = self.read(m.ffn)
        return _description(m)(**fields)

    def leftover(self) -> list[str]:
        return [name for name, tensor in self.state.items() if id(tensor) not in self.taken]


def read_weights(model: Transformer) -> ModelWeights:
    """``model``'s weights by role, fused projections split (views of its tensors, detached).

    Refuses a model with a tensor in its state dict that the description has no place for
    (a parameter added or renamed in the model package but not here), naming it.
    """
    reader = _Reader(model)
    fields: dict[str, Any] = {}
    for name, part in _model_parts(model).items():
        fields[name] = reader.read(part) if isinstance(part, nn.Module) else reader.take(part)
    for side, stack in _stacks(model).items():
        read = {id(layer): reader.read(layer) for layer in dict.fromkeys(stack)}
        fields[side] = [read[id(layer)] for layer in stack]
    if reader.leftover():
        rest = reader.leftover()
        raise MtkitError(
            f"read_weights: {rest[0]} has no place in ModelWeights ({len(rest)} such "
            "tensors); mtkit/model/weights.py does not know this model"
        )
    return ModelWeights(**fields)


# -- description -> state dict --------------------------------------------------------------------


class _Writer:
    """Fills the state dict of a model built on the meta device (names and shapes only)."""

    def __init__(self, model: nn.Module) -> None:
        self.names: dict[int, list[str]] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}
        for name, tensor in model.state_dict(keep_vars=True).items():
            self.names.setdefault(id(tensor), []).append(name)
            self.shapes[name] = tuple(tensor.shape)
        self.out: dict[str, Tensor] = {}

    def put(self, target: Tensor | None, value: Tensor | None, what: str) -> None:
        """``value`` under every name of the model's tensor ``target``."""
        if target is None:
            if value is not None:
                raise MtkitError(f"weights: {what} given, but the model has none")
            return
        names = self.names[id(target)]
        if value is None:
            raise MtkitError(f"weights: no value for {names[0]}")
        for name in names:
            if tuple(value.shape) != self.shapes[name]:
                raise MtkitError(
                    f"weights: {name} has shape {tuple(value.shape)}, the model "
                    f"expects {self.shapes[name]}"
                )
            old = self.out.get(name)
            if old is not None and old is not value and not torch.equal(old, value):
                raise MtkitError(
                    f"weights: two different values for {name}, one tensor in the "
                    "model (shared embeddings or layers)"
                )
            self.out[name] = value

    def fused(self, linear: nn.Linear | None, parts: list[LinearWeights | None], what: str) -> None:
        """Projections stacked by rows into one linear layer (or none, where it has none)."""
        if linear is None:
            self.put(None, next((p.weight for p in parts if p is not None), None), what)
            return
        if any(p is None for p in parts):
            raise MtkitError(f"weights: no {what} for {self.names[id(linear.weight)][0]}")
        self.put(linear.weight, _stacked([p.weight for p in parts]), what)  # type: ignore[union-attr]
        biases = [p.bias for p in parts]  # type: ignore[union-attr]
        if linear.bias is None:
            self.put(None, next((b for b in biases if b is not None), None), f"{what} bias")
        elif any(b is None for b in biases):
            raise MtkitError(f"weights: no value for {self.names[id(linear.bias)][0]} ({what})")
        else:
            self.put(linear.bias, _stacked(biases), f"{what} bias")  # type: ignore[arg-type]

    def write(self, m: nn.Module, value: Any, what: str) -> None:
        """The description ``value`` of a layer, sublayer or norm into ``m``'s names."""
        want = _description(m)
        if not isinstance(value, want):
            got = type(value).__name__
            raise MtkitError(f"weights: {what} is {got}, the model has {want.__name__} there")
        if isinstance(value, NormWeights):
            self.put(m.weight, value.weight, what)
            self.put(getattr(m, "bias", None), value.bias, f"{what} bias")
        elif isinstance(m, EncoderLayer | DecoderLayer):
            for field, part in _parts(m).items():
                self.write(part, getattr(value, field), f"{what}.{field}")
        else:
            self._sublayer(m, value, what)

    def _sublayer(self, m: Sublayer, value: Any, what: str) -> None:
        for names, linear in _linears(m):
            parts = [getattr(value, name) for name in names]
            self.fused(linear, parts, f"{what}.{'/'.join(names)}")
        if isinstance(m, SelfAttention | CrossAttention):
            shaw = getattr(m, "positions", None)
            tables = value.relative
            if not isinstance(shaw, ShawRelative):
                self.put(None, None if tables is None else tables.keys, f"{what}.relative")
            elif tables is None:
                raise MtkitError(f"weights: no {what}.relative (positions: relative)")
            else:
                self.put(shaw.keys.weight, tables.keys, f"{what}.relative.keys")
                self.put(shaw.values.weight, tables.values, f"{what}.relative.values")
        if isinstance(m, AverageAttention):
            if m.ffn is None:
                self.put(None, None if value.ffn is None else value.ffn.fc1.weight, f"{what}.ffn")
            else:
                self.write(m.ffn, value.ffn, f"{what}.ffn")

    def result(self) -> dict[str, Tensor]:
        missing = [name for names in self.names.values() for name in names if name not in self.out]
        if missing:
            raise MtkitError(f"weights: no value for {missing[0]} ({len(missing)} missing)")
        return {name: self.out[name] for name in self.shapes}  # in the model's order


def _stacked(tensors: list[Tensor]) -> Tensor:
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors)


def state_dict_from(cfg: ModelConfig, weights: ModelWeights) -> dict[str, Tensor]:
    """The state dict of ``Transformer(cfg)`` holding ``weights``, projections fused as the
    model fuses them; refuses a missing or surplus tensor, a wrong shape, or two values for one
    shared tensor, in one line naming it."""
    with torch.device("meta"):  # names and shapes, no memory
        model = Transformer(cfg)
    writer = _Writer(model)
    for name, part in _model_parts(model).items():
        value = getattr(weights, name)
        if isinstance(part, nn.Module):
            writer.write(part, value, name)
        else:
            writer.put(part, value, name)
    for side, stack in _stacks(model).items():
        layers = getattr(weights, side)
        if len(layers) != len(stack):
            raise MtkitError(f"weights: {len(layers)} {side} layers, the model has {len(stack)}")
        for i, (layer, value) in enumerate(zip(stack, layers, strict=True)):
            writer.write(layer, value, f"{side}[{i}]")
    return writer.result()


def load_weights(model: Transformer, weights: ModelWeights) -> None:
    """Copy ``weights`` into ``model`` (:func:`state_dict_from`, loaded strictly)."""
    model.load_state_dict(state_dict_from(model.cfg, weights), strict=True)
