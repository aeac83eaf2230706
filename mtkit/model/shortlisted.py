"""Decoding over a shortlist of target pieces (:mod:`mtkit.data.shortlist`): the output layer
of each step projects onto the shortlisted rows of the output matrix only.

A batch's sentences are cut into groups of consecutive sentences (:class:`Plan`), each
``ROWS`` decoder rows (16 sentences of beam 5, 80 of greedy search); each group allows the
union of its sentences' shortlist entries, the frequent pieces and the special ids. Per group
rather than per batch, because unions grow with the sentences: on Multi30k a default batch
(4,096 source tokens, ~200 sentences) allows half the vocabulary, 16 sentences a fifth. Not
smaller, because each group reads its own rows of the output matrix at every step: with
fewer rows per group than ~80 the matrix is read more often than it saves arithmetic
(benchmarks/README.md, "Lexical shortlist").

:class:`Shortlisted` wraps a model prepared for inference (any of
:func:`~mtkit.model.inference.prepare_for_inference`'s kinds: float, oneDNN-packed, bf16,
int8) as a :class:`~mtkit.decoding.protocol.StepDecoder` whose vocabulary is K columns: a row
of group g reads column c as target id ``tables[g, c]`` (the special ids first, then the others
in increasing order; columns past the group's own count are -inf). The wrapper feeds the real
ids to the model, projects each group's final decoder states onto its rows of the output
matrix, and follows the search's reorders to know each row's group. The search does not change,
and works over K columns, not V: log-softmax, bans and top-k cost K/V of the full vocabulary.
Hypotheses come back in columns; :meth:`Shortlisted.vocabulary_ids` maps them back. With every
id shortlisted (and mtkit's special ids, the lowest) the columns are the vocabulary, in order,
and the output equals the unrestricted model's.
"""

from __future__ import annotations

import itertools
import math
import warnings
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from mtkit.data.shortlist import Shortlist
from mtkit.data.tokenizer import SpecialIds
from mtkit.errors import MtkitError
from mtkit.model.packed import Bf16Linear, PackedLinear
from mtkit.model.transformer import Transformer

Projection = Callable[[Tensor], Tensor]
ROWS = 80  # decoder rows whose sentences share one union (benchmarks/bench_shortlist.py)


def projection_weight(model: Transformer) -> Tensor:
    """The output projection's weight (V, D) of a model not yet prepared for inference: what
    an oneDNN-packed copy of the projection no longer holds."""
    return model.output_weight.detach()


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


# each int8 output projection's weight, unpacked once (unpacking costs ~9 ms for 8,000 x 256,
# more than a sentence's output layer over its shortlist)
_UNPACKED: weakref.WeakKeyDictionary[nn.Module, Tensor] = weakref.WeakKeyDictionary()


def _int8_rows(output: nn.Module, ids: Tensor) -> nn.Module:
    """Rows ``ids`` of a dynamically quantized int8 projection: the same int8 values and scale."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization deprecation notices
        from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

        if not isinstance(output, DynamicLinear):
            raise MtkitError(
                f"a shortlist cannot restrict an output layer of type {type(output).__name__}"
            )
        if output not in _UNPACKED:
            _UNPACKED[output] = output.weight()
        rows = DynamicLinear(output.in_features, len(ids), dtype=torch.qint8)
        rows.set_weight_bias(_UNPACKED[output].index_select(0, ids), None)
    return rows


@dataclass(frozen=True)
class Plan:
    """Which target ids each group of a batch's sentences may produce, as table columns."""

    tables: Tensor  # (G, K) target id of each column; padding columns hold UNK
    sizes: tuple[int, ...]  # the real columns of each group (the rest: -inf)
    group_of: Tensor  # (N,) the group of each sentence
    special_ids: SpecialIds  # the special ids as columns (the same in every group)

    @property
    def width(self) -> int:
        return self.tables.shape[1]

    def columns(self, ids: Sequence[int], group: int = 0) -> list[int]:
        """The columns of target ids ``ids`` in ``group`` (those it does not allow left out)."""
        table = self.tables[group, : self.sizes[group]].tolist()
        where = {t: c for c, t in enumerate(table)}
        return [where[t] for t in ids if t in where]


def group_plan(
    shortlist: Shortlist,
    rows: Sequence[Sequence[int]],
    specials: SpecialIds,
    device: torch.device,
    group: int = ROWS // 5,
    extra: Sequence[int] = (),
) -> Plan:
    """The plan of a batch of source ``rows``: groups of ``group`` consecutive sentences (one
    group when all would allow the same ids); ``extra`` ids are allowed in every group."""
    first = sorted(set(specials.to_dict().values()))
    found = []
    for start in range(0, max(len(rows), 1), group):
        allowed = shortlist.union(rows[start : start + group], [*first, *extra]).tolist()
        found.append(first + [t for t in allowed if t not in first])
    group_of = torch.arange(len(rows), device=device) // group
    if all(ids == found[0] for ids in found):  # one projection for all rows (a full shortlist)
        found, group_of = found[:1], torch.zeros_like(group_of)
    width = max(map(len, found))
    tables = torch.tensor(
        [ids + [specials.unk] * (width - len(ids)) for ids in found],
        dtype=torch.long,
        device=device,
    )
    columns = SpecialIds(**{k: first.index(v) for k, v in specials.to_dict().items()})
    return Plan(tables, tuple(map(len, found)), group_of, columns)


class GroupedState:
    """A model's decoding state and the group of each of its rows, reordered together."""

    def __init__(self, inner: Any, groups: Tensor) -> None:
        self.inner = inner
        self.groups = groups  # (R,)
        self._runs: list[tuple[int, int, int]] | None = None

    def reorder(self, rows: Tensor, sources: Tensor | None = None) -> None:
        self.inner.reorder(rows, sources)
        self.groups = self.groups.index_select(0, rows)
        self._runs = None

    def runs(self) -> list[tuple[int, int, int]]:
        """(group, first row, end row) of each run of consecutive rows in one group: one per
        group, as the search keeps a sentence's rows together and sentences in order."""
        if self._runs is None:
            self._runs, start = [], 0
            for group, rows in itertools.groupby(self.groups.tolist()):
                stop = start + len(list(rows))
                self._runs.append((group, start, stop))
                start = stop
        return self._runs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Shortlisted:
    """``model`` for the search, its target vocabulary cut to the columns of ``plan``;
    everything but the state, the step and the ids is the model's. ``plain``: the prepared
    model whose output matrix is read (``model`` itself, or what ``model`` wraps);
    ``weight``: its projection weight before packing (:func:`projection_weight`)."""

    def __init__(
        self, model: Any, plan: Plan, plain: nn.Module, weight: Tensor | None = None
    ) -> None:
        self._model = model
        self.plan = plan
        self.special_ids = plan.special_ids
        groups = zip(plan.tables, plan.sizes, strict=True)
        self._projections = [output_rows(plain, ids[:size], weight) for ids, size in groups]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    @property
    def tgt_vocab_size(self) -> int:
        return self.plan.width

    def start_state(self, encoded: Any, max_len: int) -> GroupedState:
        return GroupedState(self._model.start_state(encoded, max_len), self.plan.group_of)

    def decode_step(self, tokens: Tensor, state: GroupedState) -> Tensor:
        """Tokens (R,) as columns; logits (R, K) over the columns of each row's group."""
        real = self.plan.tables[state.groups, tokens]
        hidden = self._model.decode_hidden(real, state.inner)[:, 0]  # (R, D)
        if len(self._projections) == 1 and self.plan.sizes[0] == self.plan.width:
            return self._projections[0](hidden)
        out = hidden.new_full((hidden.shape[0], self.plan.width), -math.inf)
        for group, start, stop in state.runs():
            size = self.plan.sizes[group]
            out[start:stop, :size] = self._projections[group](hidden[start:stop])
        return out

    def vocabulary_ids(self, sentence: int, tokens: list[int]) -> list[int]:
        """A hypothesis of sentence ``sentence`` (its tokens, columns) as vocabulary ids."""
        table = self.plan.tables[int(self.plan.group_of[sentence])].tolist()
        return [table[t] for t in tokens]


class ShortlistedDraft:
    """A draft model for speculative decoding (``--draft-shortlist``) that guesses among the
    target pieces ``shortlist`` allows each batch: on :meth:`encode`, the union over the batch's
    source pieces (the frequent pieces and the special ids always), and :meth:`decode_steps`
    gives logits (R, n, K) over those K pieces, whose vocabulary ids are :attr:`columns`
    (increasing). A draft only proposes, and the models check every proposal over the whole
    vocabulary, so the output does not change; what it saves is the draft's output layer, most
    of a small draft's step when it decodes one sentence. ``plain`` and ``weight`` as for
    :class:`Shortlisted`."""

    def __init__(
        self, model: Any, shortlist: Shortlist, specials: SpecialIds, weight: Tensor | None = None
    ) -> None:
        self._model = model
        self.shortlist = shortlist
        self.specials = sorted(set(specials.to_dict().values()))
        self.weight = weight
        self.columns: Tensor | None = None
        self._project: Projection | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def encode(self, src: Tensor) -> Any:
        """The model's encoder output; the batch's pieces become the columns."""
        ids = self.shortlist.union(src.tolist(), self.specials)
        self.columns = torch.as_tensor(ids, dtype=torch.long, device=src.device)
        self._project = output_rows(self._model, self.columns, self.weight)
        return self._model.encode(src)

    def decode_steps(self, tokens: Tensor, state: Any) -> Tensor:
        """Tokens (R, n), vocabulary ids; logits (R, n, K) over :attr:`columns`."""
        if self._project is None:
            raise MtkitError("ShortlistedDraft.decode_steps before encode")
        return self._project(self._model.decode_steps_hidden(tokens, state))
