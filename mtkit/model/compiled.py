"""The decoder's step as one compiled graph (``--compile``): ``torch.compile`` of a prepared
model's :meth:`~mtkit.model.transformer.Transformer.decode_step`, for CPU decoding.

What a step costs besides its linear layers (norms, residuals, rotations, the cache write,
attention over a few keys, hundreds of small kernels and the Python between them) is what a
compiled graph saves: inductor fuses the elementwise work into a few C++ loops and calls the
rest as kernels, without Python in between. The step is the model's own code, traced through
(every position scheme, norm and feed-forward variant comes with it); only its inputs change:
the step's cache tensors and the position ``t`` go in as arguments, so one graph serves every
step, sentence and batch. Rows, source length, cache length and ``t`` are dynamic; the graphs
are the first step's, the later steps', a one-sentence batch's and greedy search's (one row per
source), reused after that.

Linear layers whose weights are prepared for a CPU library (int8 ``torch.ao`` dynamic
quantization on fbgemm, weights packed for oneDNN) hold opaque objects that dynamo cannot trace;
each becomes :class:`OpaqueLinear`, which calls the very same kernel through one custom
operator (``mtkit::linear``) that inductor calls as an external kernel. So the compiled
step computes what the eager step computes, by the same kernels for the linear layers and
by inductor's fused code elsewhere (float32 rounding differs).

Compiled graphs persist in inductor's on-disk cache (``TORCHINDUCTOR_CACHE_DIR``, by default
under the user's cache directory, ``mtkit/inductor``): the first run on a machine compiles for
minutes on a small CPU, later runs load. The cache keys on the graph, the torch version and
the CPU, so a stale entry is never used, only missed.

Not compiled (eager, same output): steps that record cross-attention (``--alignment``),
several positions at once (speculative decoding's check), a shortlist's projection. The
average attention (``decoder_self_attention: average``) keeps a running sum instead of a
key/value cache and is refused by name.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import torch
import torch._dynamo
import torch.fx.experimental._config
from torch import Tensor, nn

from mtkit.errors import MtkitError
from mtkit.model.packed import PackedLinear, replace_modules
from mtkit.model.state import DecoderState, KeyValueCache, LayerState, SourceCache
from mtkit.model.transformer import EncoderOut, Transformer

# opaque linear layers, by slot: (kind, prepared weight, bias, out_features)
_SLOTS: list[tuple[str, Any, Tensor | None, int]] = []
_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}  # PackedLinear's, by kind
_KINDS = {dtype: kind for kind, dtype in _DTYPES.items()}
RECOMPILE_LIMIT = 64  # graphs per compiled function: a few per model, several models (ensembles)


@torch.library.custom_op("mtkit::linear", mutates_args=())
def _opaque_linear(x: Tensor, slot: int) -> Tensor:
    kind, weight, bias, _ = _SLOTS[slot]
    if kind == "int8":  # what torch.ao's DynamicQuantizedLinear (version 4) calls
        return torch.ops.quantized.linear_dynamic(x, weight, reduce_range=True)
    return PackedLinear.run(x, weight, bias, _DTYPES[kind])


@_opaque_linear.register_fake
def _(x: Tensor, slot: int) -> Tensor:
    return x.new_empty((*x.shape[:-1], _SLOTS[slot][3]))


class OpaqueLinear(nn.Module):
    """A linear layer whose prepared weight dynamo cannot see, called through ``mtkit::linear``
    (the same kernel as the layer it replaces)."""

    def __init__(self, kind: str, weight: Any, bias: Tensor | None, out_features: int) -> None:
        super().__init__()
        self.kind, self.out_features = kind, out_features
        self.slot = len(_SLOTS)
        _SLOTS.append((kind, weight, bias, out_features))

    def forward(self, x: Tensor) -> Tensor:
        return torch.ops.mtkit.linear(x, self.slot)

    def extra_repr(self) -> str:
        return f"out_features={self.out_features}, {self.kind}, slot={self.slot}"


def _opaque(module: nn.Module) -> OpaqueLinear | None:
    """The :class:`OpaqueLinear` that stands for ``module``, or None for a traceable layer."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

    if isinstance(module, DynamicQuantizedLinear):
        if module._packed_params.dtype != torch.qint8 or (module.version or 0) < 4:
            raise MtkitError("--compile: only int8 dynamic quantization (mtkit's) is supported")
        weight = module._packed_params._packed_params
        return OpaqueLinear("int8", weight, None, module.out_features)
    if isinstance(module, PackedLinear):
        return OpaqueLinear(_KINDS[module.dtype], module.packed, module.bias, module.out_features)
    return None


def check_compilable(model: nn.Module, device: torch.device) -> None:
    """Refuse, in one line, what ``--compile`` cannot compile."""
    if device.type != "cpu":
        raise MtkitError(f"--compile compiles the CPU decoding step; it does not run on "
                         f"{device.type} (leave it out)")  # fmt: skip
    variant = getattr(getattr(model, "cfg", None), "decoder_self_attention", "attention")
    if variant != "attention":
        raise MtkitError(f"--compile: decoder_self_attention '{variant}' keeps no key/value "
                         "cache and is not compiled; translate without --compile")  # fmt: skip


def cache_dir() -> Path:
    """Where compiled graphs are kept between runs: ``$TORCHINDUCTOR_CACHE_DIR`` if set, else
    ``$XDG_CACHE_HOME/mtkit/inductor`` (``~/.cache/mtkit/inductor``)."""
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mtkit" / "inductor"


def compile_step(model: nn.Module, device: torch.device, backend: str = "inductor") -> nn.Module:
    """In place: ``model``'s (a prepared Transformer's) ``decode_step`` becomes a compiled
    graph; opaque linear layers are swapped for :class:`OpaqueLinear`. Returns the model.
    ``backend``: torch.compile's (tests trace with ``aot_eager``, which compiles nothing)."""
    check_compilable(model, device)
    replace_modules(model, _opaque)  # one OpaqueLinear (one slot) per prepared linear layer
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_dir()))
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit,
                                               RECOMPILE_LIMIT)  # fmt: skip
    # sizes that happen to be equal (32 sentences of 32 pieces) are not taken to be one size
    torch.fx.experimental._config.use_duck_shape = False
    model.decode_step = CompiledStep(model, backend)
    model.start_state = functools.partial(_start_state, model)
    return model


def _start_state(model: nn.Module, enc: EncoderOut, max_len: int,
                 alignment_layer: int | None = None) -> DecoderState:  # fmt: skip
    """The model's start state with one step more room in its caches than asked: the last
    step then never fills its buffer (a full buffer's prefix has other strides: a graph of its
    own)."""
    return Transformer.start_state(model, enc, max_len + 1, alignment_layer)


def _dense(x: Tensor) -> Tensor:
    """``x`` if it has the standard strides of its shape, else a copy that has them (even
    where ``contiguous`` would keep odd strides of dimensions of size 1)."""
    strides, step = [], 1
    for size in reversed(x.shape):
        strides.append(step)
        step *= size
    if x.stride() == tuple(reversed(strides)):
        return x
    return torch.empty(x.shape, dtype=x.dtype, device=x.device).copy_(x)


class CompiledStep:
    """``decode_step(tokens, state)`` of one model as a compiled graph over the state's
    tensors; the state's Python-side lengths advance as the eager step advances them."""

    def __init__(self, model: nn.Module, backend: str = "inductor") -> None:
        self.model = model
        self.graph = torch.compile(self._step, backend=backend)

    def _step(self, tokens: Tensor, t: int, keys: list[Tensor], values: list[Tensor],
              source_keys: list[Tensor], source_values: list[Tensor],
              src_keep: Tensor) -> Tensor:  # fmt: skip
        layers = [LayerState(KeyValueCache(k, v, t), SourceCache(sk, sv))
                  for k, v, sk, sv in zip(keys, values, source_keys, source_values,
                                          strict=True)]  # fmt: skip
        # tokens (N, group): N sources x the rows of each, so that every size in the graph is
        # a product of the two (a row count divided by a group size makes inductor's loops
        # compute integer divisions for every element)
        state = DecoderState(layers, src_keep, offset=t, group=tokens.shape[1])
        return Transformer.decode_step(self.model, tokens.reshape(-1), state)

    def __call__(self, tokens: Tensor, state: DecoderState) -> Tensor:
        caches = [layer.own for layer in state.layers]
        t = state.offset
        eager = state.attention is not None or not all(
            isinstance(c, KeyValueCache) and c.length == t for c in caches
        )
        if eager:  # recording cross-attention (alignments): the model's own step
            return Transformer.decode_step(self.model, tokens, state)
        # every input in the standard strides (a graph guards on strides): the source
        # keys/values and mask once per batch, in the state; the tokens (the search's last
        # column of its history, a strided view) every step
        for layer in state.layers:
            layer.source.k, layer.source.v = _dense(layer.source.k), _dense(layer.source.v)
        if state.src_keep is None:  # no padding: a mask that keeps everything (one graph)
            n, _, s, _ = state.layers[0].source.k.shape
            state.src_keep = torch.ones((n, 1, 1, s), dtype=torch.bool, device=tokens.device)
        state.src_keep = keep = _dense(state.src_keep)
        keys, values = [c.k for c in caches], [c.v for c in caches]
        source_keys = [layer.source.k for layer in state.layers]
        source_values = [layer.source.v for layer in state.layers]
        tokens = _dense(tokens).view(keep.shape[0], state.group)
        for x, dims in (
            (tokens, (0, 1)),
            *((k, (0, 2)) for k in keys + values),
            *((k, (0, 2)) for k in source_keys + source_values),
            (keep, (0, 3)),
        ):
            for dim in dims:  # rows, the cache's length, sources, source length
                torch._dynamo.maybe_mark_dynamic(x, dim)
        logits = self.graph(tokens, t, keys, values, source_keys, source_values, keep)
        for cache in caches:
            cache.length = t + 1
        state.offset = t + 1
        return logits
