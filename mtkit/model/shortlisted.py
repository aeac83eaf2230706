"""Decoding over a shortlist of target pieces (:mod:`mtkit.data.shortlist`): the output layer
of each step projects onto the batch's shortlisted rows only.

:class:`Shortlisted` wraps a model prepared for inference (any of
:func:`~mtkit.model.inference.prepare_for_inference`'s kinds: float, oneDNN-packed, bf16,
int8) as a :class:`~mtkit.decoding.protocol.StepDecoder` whose vocabulary is the K shortlisted
ids, in increasing order: the search sees ids 0..K-1 (its special ids mapped the same way), the
wrapper feeds ``ids[token]`` to the model and projects the final decoder state onto rows
``ids`` of the output matrix. The search itself does not change, and it works over K columns,
not V: log-softmax, bans and top-k cost K/V of the full vocabulary. Hypotheses come back in
shortlist ids; :meth:`Shortlisted.vocabulary_ids` maps them back. With every id shortlisted the
rows are the whole matrix, in order, and the output equals the unrestricted model's.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from mtkit.data.tokenizer import DEFAULT_SPECIAL_IDS, SpecialIds
from mtkit.errors import MtkitError
from mtkit.model.packed import Bf16Linear, PackedLinear
from mtkit.model.transformer import Transformer

Projection = Callable[[Tensor], Tensor]


def projection_weight(model: Transformer) -> Tensor:
    """The output projection's weight (V, D) of a model not yet prepared for inference: what
    an oneDNN-packed copy of the projection no longer holds."""
    return (model.output.weight if model.output is not None else model.tgt_embed.weight).detach()


def output_rows(model: nn.Module, ids: Tensor, weight: Tensor | None = None) -> Projection:
    """A function computing ``model.logits(x)[..., ids]`` with only those rows of the output
    matrix, for a prepared ``model`` (``weight``: :func:`projection_weight` of the model before
    preparation, needed when its projection was packed for oneDNN)."""
    output = model.output
    bias = None if model.output_bias is None else model.output_bias.index_select(0, ids)
    if output is None:  # tied to the target embedding
        rows = model.tgt_embed.weight.index_select(0, ids)
        project: Projection = lambda x: F.linear(x, rows)  # noqa: E731
    elif isinstance(output, nn.Linear):
        rows = output.weight.index_select(0, ids)
        project = lambda x: F.linear(x, rows)  # noqa: E731
    elif isinstance(output, PackedLinear):
        if weight is None:
            raise MtkitError("a packed output projection needs its weight for a shortlist")
        project = PackedLinear(weight.index_select(0, ids.to(weight.device)), None, output.dtype)
    elif isinstance(output, Bf16Linear):
        project = Bf16Linear(output.weight.index_select(0, ids), None)
    else:
        project = _int8_rows(output, ids)
    if bias is None:
        return project
    return lambda x: project(x) + bias


def _int8_rows(output: nn.Module, ids: Tensor) -> nn.Module:
    """Rows ``ids`` of a dynamically quantized int8 projection: the same int8 values and scale."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization deprecation notices
        from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

        if not isinstance(output, DynamicLinear):
            raise MtkitError(f"a shortlist cannot restrict an output layer of type "
                             f"{type(output).__name__}")  # fmt: skip
        rows = DynamicLinear(output.in_features, len(ids), dtype=torch.qint8)
        rows.set_weight_bias(output.weight().index_select(0, ids), None)
    return rows


class Shortlisted:
    """``model`` for the search, its target vocabulary cut to ``ids`` (sorted, specials among
    them); everything but the step and the ids is the model's."""

    def __init__(self, model: Any, ids: Tensor, project: Projection) -> None:
        self._model = model
        self.ids = ids
        self._project = project
        specials = getattr(model, "special_ids", DEFAULT_SPECIAL_IDS)
        position = {int(v): i for i, v in enumerate(ids.tolist())}
        missing = [name for name, v in specials.to_dict().items() if v not in position]
        if missing:
            raise MtkitError(f"shortlist without the special ids {', '.join(missing)}")
        self.special_ids = SpecialIds(**{name: position[v] for name, v in
                                         specials.to_dict().items()})  # fmt: skip

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    @property
    def tgt_vocab_size(self) -> int:
        return len(self.ids)

    def decode_step(self, tokens: Tensor, state: Any) -> Tensor:
        """Tokens (R,) in shortlist ids; logits (R, K) over the shortlist."""
        hidden = self._model.decode_hidden(self.ids.index_select(0, tokens), state)
        return self._project(hidden)[:, 0]

    def vocabulary_ids(self, tokens: list[int]) -> list[int]:
        """Shortlist ids (a hypothesis' tokens) as the model's vocabulary ids."""
        table = self.ids.tolist()
        return [table[t] for t in tokens]
