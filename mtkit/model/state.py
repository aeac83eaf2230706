"""Incremental decoding state: one small object per layer, each reordering its own tensors.

fairseq keeps a dict of cached tensors that ``reorder_incremental_state`` walks (Ott et al.,
2019); here the state is typed. A decoder layer's :class:`LayerState` holds what its
self-attention cached (:class:`KeyValueCache`, or another kind such as a running average) and
what its cross-attention computed once per source sentence (:class:`SourceCache`). The search
sees only :class:`DecoderState.reorder`, so a new attention kind brings its own state object
(anything with ``reorder(rows)``) without touching the search. Speculative decoding
(:mod:`mtkit.decoding.speculative`) feeds several positions at once and then rolls the state
back to the accepted ones: each state object owns that too (``truncate(length)``).

Rows and sources: R rows are being decoded (sentences x beams); each run of ``group`` adjacent
rows (one sentence's beams) shares one source row, so the beams attend to their source together
as ``group`` query positions over one copy of its keys/values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor


class RowState(Protocol):
    """A layer's target-side state: whatever it keeps per row being decoded."""

    def reorder(self, rows: Tensor) -> None:
        """Keep rows ``rows`` (R',) in that order: beam moves, sentences leaving."""

    def nbytes(self) -> int:
        """Bytes held for the rows' cached tensors."""

    def truncate(self, length: int) -> None:
        """Forget every position from ``length`` on (all rows alike): speculative decoding's
        roll-back to the accepted positions."""


@dataclass
class KeyValueCache:
    """Self-attention keys/values of one layer, preallocated for ``max_len`` steps.

    ``append`` writes one step (or several: speculative decoding); ``truncate`` forgets the
    last ones (the buffers stay, the length shrinks); ``reorder`` keeps rows: the filled steps
    are gathered straight into a spare pair of buffers (or their first rows, as sentences
    leave), which then swap with the current ones: one copy per step, and no allocation but
    where the rows grow (a beam's first step).
    """

    k: Tensor  # (R, Hkv, max_len, Dh)
    v: Tensor  # (R, Hkv, max_len, Dh)
    length: int = 0  # steps filled
    spare: tuple[Tensor, Tensor] | None = None
    room: tuple[Tensor, Tensor] | None = None  # the buffers k, v are the first rows of
    joined: bool = False  # rows joined it: buffers keep room for more (:meth:`join`)

    @classmethod
    def empty(cls, like: Tensor, rows: int, heads: int, max_len: int, dim: int) -> KeyValueCache:
        shape = (rows, heads, max_len, dim)
        return cls(like.new_empty(shape), like.new_empty(shape))

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store n steps' k, v (R, Hkv, n, Dh), n = 1 but for speculative decoding; returns every
        filled step's keys/values."""
        t, n = self.length, k.shape[-2]
        self.k[:, :, t : t + n] = k
        self.v[:, :, t : t + n] = v
        self.length = t + n
        return self.k[:, :, : t + n], self.v[:, :, : t + n]

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` steps (later appends overwrite the rest)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of {self.length} steps to {length}")
        self.length = length

    def reorder(self, rows: Tensor) -> None:
        n, r = self.length, len(rows)
        if self.spare is None or self.spare[0].shape[0] < r:  # more rows: the first step
            shape = (r + (r // 2 if self.joined else 0), *self.k.shape[1:])
            self.spare = (self.k.new_empty(shape), self.v.new_empty(shape))
        # fewer rows (sentences leaving): the first rows of the spare pair, a dense view
        k, v = (x[:r] for x in self.spare)
        torch.index_select(self.k[:, :, :n], 0, rows, out=k[:, :, :n])
        torch.index_select(self.v[:, :, :n], 0, rows, out=v[:, :, :n])
        self.spare, self.room = self.room or (self.k, self.v), self.spare
        self.k, self.v = k, v

    def nbytes(self) -> int:
        """Bytes held for the keys/values (the spare pair, when allocated, doubles it)."""
        return self.k.nbytes + self.v.nbytes

    def join(self, other: KeyValueCache) -> None:
        """Add ``other``'s rows (an empty cache: rows joining a running decode) after these:
        their first position goes at step ``length``; the slots before it hold zeros, which
        :class:`DecoderState`'s key mask hides. The buffers grow to hold ``length`` plus
        ``other``'s steps where they must."""
        if other.length:
            raise ValueError(f"rows joining a decode must be new, not {other.length} steps in")
        n, (r, heads, _, dim), more = self.length, self.k.shape, other.k.shape[0]
        k, v = self.room or (self.k, self.v)
        need = n + other.k.shape[2]
        if k.shape[0] < r + more or k.shape[2] < need:  # grown by half again: joins are many
            shape = ((r + more) * 3 // 2, heads, grown(k.shape[2], need), dim)
            k, v = self.k.new_empty(shape), self.v.new_empty(shape)
            k[:r, :, :n], v[:r, :, :n] = self.k[:, :, :n], self.v[:, :, :n]
            self.spare = None
        k[r : r + more, :, :n] = 0  # the slots before the new rows' first: masked, not NaN
        v[r : r + more, :, :n] = 0
        self.room, self.joined = (k, v), True
        self.k, self.v = k[: r + more], v[: r + more]

    def compact(self, steps: int) -> None:
        """Forget the first ``steps`` slots (no row reads them any more): every position
        moves ``steps`` slots back."""
        n = self.length
        self.k[:, :, : n - steps] = self.k[:, :, steps:n].clone()
        self.v[:, :, : n - steps] = self.v[:, :, steps:n].clone()
        self.length = n - steps


def grown(have: int, need: int) -> int:
    """A buffer dimension of ``have`` that must hold ``need``: as it is, or half again."""
    return have if have >= need else max(need, have * 3 // 2)


@dataclass
class AttentionHistory:
    """One decoder layer's cross-attention distribution at every step, per row (averaged over
    heads): what word alignments read, recorded during the search so that no teacher-forced
    pass has to compute it again. Preallocated for ``max_len`` steps, and reordered, truncated
    and swapped with a spare buffer as :class:`KeyValueCache` is."""

    layer: int  # the decoder layer (0-based) whose cross-attention is recorded
    max_len: int
    probs: Tensor | None = None  # (R, max_len, S), allocated at the first step
    length: int = 0
    spare: Tensor | None = None

    def append(self, probs: Tensor) -> None:
        """Store n steps' distributions, probs (R, n, S)."""
        if self.probs is None:
            self.probs = probs.new_empty((probs.shape[0], self.max_len, probs.shape[-1]))
        t, n = self.length, probs.shape[1]
        self.probs[:, t : t + n] = probs
        self.length = t + n

    def row(self, row: int) -> Tensor:
        """Row ``row``'s distributions so far (steps, S), a copy."""
        assert self.probs is not None
        return self.probs[row, : self.length].clone()

    def truncate(self, length: int) -> None:
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a history of {self.length} steps to {length}")
        self.length = length

    def reorder(self, rows: Tensor) -> None:
        if self.probs is None:
            return
        n = self.length
        if len(rows) != self.probs.shape[0]:
            out = self.probs.new_empty((len(rows), *self.probs.shape[1:]))
            out[:, :n] = self.probs[:, :n].index_select(0, rows)
            self.probs, self.spare = out, None
            return
        if self.spare is None:
            self.spare = torch.empty_like(self.probs)
        out = self.spare
        torch.index_select(self.probs[:, :n], 0, rows, out=out[:, :n])
        self.spare, self.probs = self.probs, out

    def nbytes(self) -> int:
        return 0 if self.probs is None else self.probs.nbytes


@dataclass
class SourceCache:
    """Cross-attention keys/values of one layer, one row per source sentence. Once sources
    joined (a server's decode), the buffers keep room for more: a join writes only the new
    rows, and when sentences leave a beam search, the last ones take their places (the others
    stay put); in any other order sources leave into a spare pair (as :class:`KeyValueCache`'s
    rows)."""

    k: Tensor  # (N, Hkv, S, Dh)
    v: Tensor  # (N, Hkv, S, Dh)
    room: tuple[Tensor, Tensor] | None = None  # joined: the buffers k, v are the first rows of
    spare: tuple[Tensor, Tensor] | None = None

    def reorder(self, sources: Tensor) -> None:
        room = self._room()
        if room is None or len(sources) > room[0].shape[0]:  # (more rows than room: new ones)
            self.k, self.v = self.k.index_select(0, sources), self.v.index_select(0, sources)
            return
        n = len(sources)
        moved = sources.ne(torch.arange(n, device=sources.device)).nonzero()[:, 0]
        taken = sources[moved]
        if bool(taken.ge(n).all()):
            # sentences left and the last ones took their places (a beam search's order): only
            # those move, from rows that are not kept where they are
            self.k[moved], self.v[moved] = self.k[taken], self.v[taken]
            self.k, self.v = self.k[:n], self.v[:n]
            return
        if self.spare is None or self.spare[0].shape != room[0].shape:
            self.spare = (torch.empty_like(room[0]), torch.empty_like(room[1]))
        k, v = (x[: len(sources)] for x in self.spare)
        torch.index_select(self.k, 0, sources, out=k)
        torch.index_select(self.v, 0, sources, out=v)
        self.spare, self.room, self.k, self.v = room, self.spare, k, v

    def _room(self) -> tuple[Tensor, Tensor] | None:
        """The buffers k, v are the first rows of, while they are."""
        return self.room if self.room and self.room[0].data_ptr() == self.k.data_ptr() else None

    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes

    def join(self, other: SourceCache) -> None:
        """Add ``other``'s source rows after these, the shorter padded with zeros to the
        longer source (the source mask hides the padding); the buffers grow by half again, or
        wider, where they must."""
        (n, heads, s, dim), (more, _, width, _) = self.k.shape, other.k.shape
        room = self._room()
        if room is None or room[0].shape[0] < n + more or room[0].shape[2] < width:
            shape = ((n + more) * 3 // 2, heads, max(s, width), dim)
            room = (self.k.new_zeros(shape), self.v.new_zeros(shape))
            room[0][:n, :, :s], room[1][:n, :, :s] = self.k, self.v
        k, v = room
        k[n : n + more, :, :width], v[n : n + more, :, :width] = other.k, other.v
        k[n : n + more, :, width:], v[n : n + more, :, width:] = 0, 0
        self.room, self.k, self.v = room, k[: n + more], v[: n + more]


def joined_keep(
    keep: Tensor | None, widths: tuple[int, int], other: Tensor | None, rows: tuple[int, int]
) -> Tensor | None:
    """The source mask (N1 + N2, 1, 1, S) of two sets of source rows of ``widths`` positions
    (``rows`` of each; a mask of None: every position real), padded to the longer; None where
    nothing is padding."""
    if keep is None and other is None and widths[0] == widths[1]:
        return None
    width = max(widths)
    parts = []
    for given, s, n in zip((keep, other), widths, rows, strict=True):
        full = given if given is not None else torch.ones(n, 1, 1, s, dtype=torch.bool)
        parts.append(F.pad(full.to(_device(keep, other)), (0, width - s), value=False))
    return torch.cat(parts)


def _device(*masks: Tensor | None) -> torch.device | None:
    return next((m.device for m in masks if m is not None), None)


@dataclass
class LayerState:
    """One decoder layer's state: its self-attention's and its cross-attention's."""

    own: RowState  # KeyValueCache, or a variant's state (e.g. a running average)
    source: SourceCache

    def reorder(self, rows: Tensor) -> None:
        self.own.reorder(rows)

    def reorder_source(self, sources: Tensor) -> None:
        self.source.reorder(sources)

    def truncate(self, length: int) -> None:
        self.own.truncate(length)  # the source side does not grow with the steps

    def join(self, other: LayerState) -> None:
        """Add ``other``'s rows and sources after these (see :meth:`DecoderState.join`)."""
        if not isinstance(self.own, KeyValueCache) or type(other.own) is not type(self.own):
            raise ValueError(f"a {type(self.own).__name__} cannot take rows joining a decode")
        self.own.join(other.own)
        self.source.join(other.source)

    def compact(self, steps: int) -> None:
        assert isinstance(self.own, KeyValueCache)  # only a joined state is compacted
        self.own.compact(steps)


@dataclass
class DecoderState:
    """The whole decoder's state: a :class:`LayerState` per layer, the source padding mask, the
    steps decoded so far (the position of the next token) and the rows per source row."""

    layers: list[LayerState]
    src_keep: Tensor | None  # (N, 1, 1, S) bool, True at real source tokens; None: no padding
    offset: int = 0
    group: int = 1
    attention: AttentionHistory | None = None  # one layer's cross-attention, when recorded
    # (R,) long: the slot of each row's first position, where rows joined a running decode
    # (:meth:`join`); None: every row started at slot 0 (a batch decoded together)
    first: Tensor | None = None

    def positions(self) -> Tensor | None:
        """Each row's position at the next step (R,), None where all are at ``offset``."""
        return None if self.first is None else self.offset - self.first

    def self_keep(self) -> Tensor | None:
        """(R, 1, 1, offset + 1) bool: the slots each row's next query reads (from its first
        on), None where every row reads them all."""
        if self.first is None:
            return None
        slots = torch.arange(self.offset + 1, device=self.first.device)
        return slots[None, None, None, :] >= self.first[:, None, None, None]

    def join(self, other: DecoderState) -> None:
        """Add the rows of ``other``, a state just started (no step yet) over new sources,
        after these, at the next slot: they go on as if decoded alone (each row's positions
        count from its own first slot, and its queries read no slot before it). Sentences
        that share a source row share it in both (the same ``group``)."""
        if other.offset or other.group != self.group:
            raise ValueError("rows joining a decode must be new ones of the same group")
        if self.attention is not None or other.attention is not None:
            raise ValueError("a state that records cross-attention takes no rows joining it")
        sources = (self.layers[0].source.k.shape, other.layers[0].source.k.shape)
        widths = (sources[0][2], sources[1][2])
        self.src_keep = joined_keep(
            self.src_keep, widths, other.src_keep, (sources[0][0], sources[1][0])
        )
        for mine, theirs in zip(self.layers, other.layers, strict=True):
            mine.join(theirs)
        rows = sources[1][0] * other.group
        device = self.layers[0].source.k.device
        first = self.first
        if first is None:
            first = torch.zeros(sources[0][0] * self.group, dtype=torch.long, device=device)
        self.first = torch.cat([first, torch.full((rows,), self.offset, device=device)])

    def compact(self) -> int:
        """Forget the slots before every row's first once they are half the slots (a compaction
        copies every buffer row's; a step reads a few masked ones for little); returns how many
        were dropped (the next token's slot moved back by that)."""
        if self.first is None:
            return 0
        steps = int(self.first.min())
        if steps * 2 < self.offset:
            steps = 0
        if steps:
            for layer in self.layers:
                layer.compact(steps)
            self.first = self.first - steps
            self.offset -= steps
        if not bool(self.first.any()):
            self.first = None  # every row from slot 0: no mask needed
        return steps

    def reorder(self, rows: Tensor, sources: Tensor | None = None) -> None:
        """Keep rows ``rows`` (R',); ``sources`` (N',), when given, also selects source rows,
        each then shared by ``R' / N'`` adjacent rows. Without ``sources`` rows only move among
        the beams of their own sentence and the source side stays as it is."""
        for layer in self.layers:
            layer.reorder(rows)
        if self.attention is not None:
            self.attention.reorder(rows)
        if self.first is not None:
            self.first = self.first.index_select(0, rows)
        if sources is None:
            return
        if len(rows) % len(sources):
            raise ValueError(f"{len(rows)} rows cannot share {len(sources)} sources evenly")
        for layer in self.layers:
            layer.reorder_source(sources)
        if self.src_keep is not None:
            self.src_keep = self.src_keep.index_select(0, sources)
        self.group = len(rows) // len(sources)

    def truncate(self, length: int) -> None:
        """Roll every layer back to its first ``length`` positions (speculative decoding: the
        positions after the accepted tokens are forgotten); the next token goes at ``length``."""
        for layer in self.layers:
            layer.truncate(length)
        if self.attention is not None:
            self.attention.truncate(length)
        self.offset = length

    def attended(self, row: int) -> Tensor | None:
        """Row ``row``'s recorded cross-attention (steps so far, S), None when not recorded."""
        return None if self.attention is None else self.attention.row(row)

    def nbytes(self) -> int:
        """Bytes of cached keys/values (and other per-layer tensors) held now."""
        held = sum(layer.own.nbytes() + layer.source.nbytes() for layer in self.layers)
        return held + (0 if self.attention is None else self.attention.nbytes())
