"""The compiled step's key/value caches: each position stays in the buffer row that computed
it, and the rows point at theirs (:class:`PointerCache`), so that a beam's reorder moves
pointers, never keys or values (:mod:`mtkit.model.compiled`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from mtkit.model.state import KeyValueCache, grown


@dataclass
class PointerCache(KeyValueCache):
    """A :class:`KeyValueCache` whose keys/values never move (``--compile``'s steps): each
    position stays in the buffer row that computed it, and ``origin`` (R, max_len) says, for
    every row and position, which buffer row holds it. A reorder gathers these pointers (R x
    max_len integers) instead of the keys and values (R x steps x Hkv x Dh numbers each);
    ``append`` returns the rows' keys/values read through them, a gather that a compiled graph
    fuses into the attention reading it (eagerly it is a copy, as a reorder was). ``k``/``v``
    are the buffers (P >= R rows), not the rows' keys/values."""

    origin: Tensor | None = None  # (R, max_len) long: the buffer row of each row's position

    @classmethod
    def of(cls, cache: KeyValueCache, values: torch.dtype | None = None) -> PointerCache:
        """An empty cache's buffers, each row its own buffer row; ``values``: the values'
        buffer in that dtype (bf16 where the values come out of a bf16 layer: the same
        numbers, half the bytes a step reads), read back in the keys' dtype."""
        rows, _, max_len, _ = cache.k.shape
        origin = torch.arange(rows, device=cache.k.device)[:, None].repeat(1, max_len)
        v = cache.v if values is None else cache.v.new_empty(cache.v.shape, dtype=values)
        return cls(cache.k, v, cache.length, origin=origin)

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store n steps' k, v (R, Hkv, n, Dh) in buffer rows 0..R-1; returns every filled
        step's keys/values of the R rows (R, Hkv, t + n, Dh)."""
        assert self.origin is not None
        t, n, rows = self.length, k.shape[-2], k.shape[0]
        here = torch.arange(rows, device=k.device)  # (an index, not a slice: no P >= R guard)
        self.k[:, :, t : t + n].index_copy_(0, here, k)
        self.v[:, :, t : t + n].index_copy_(0, here, v.to(self.v.dtype))
        self.origin[:, t : t + n] = here[:, None].expand(rows, n)
        self.length = t + n
        where = self.origin[:, None, : t + n]  # (R, 1, t + n)
        heads = torch.arange(k.shape[1], device=k.device)[None, :, None]
        steps = torch.arange(t + n, device=k.device)[None, None, :]
        return self.k[where, heads, steps], self.v[where, heads, steps].to(k.dtype)

    def reorder(self, rows: Tensor) -> None:
        assert self.origin is not None
        if len(rows) > self.k.shape[0]:  # more rows than buffer rows (a beam's first step)
            n, held = self.length, self.k.shape[0]
            k, v = (x.new_empty((len(rows), *x.shape[1:])) for x in (self.k, self.v))
            k[:held, :, :n], v[:held, :, :n] = self.k[:, :, :n], self.v[:, :, :n]
            self.k, self.v = k, v
        self.origin = self.origin.index_select(0, rows)

    def join(self, other: KeyValueCache) -> None:
        """Add ``other``'s rows (a new pointer cache: rows joining a running decode) after
        these. Their slots before ``length`` point at buffer row 0, which every step writes
        (finite keys that :class:`~mtkit.model.state.DecoderState`'s key mask hides); their
        own positions go to the buffer rows after the live ones, as :meth:`append` writes them.
        The buffers grow by half again, rows or steps, where they must (joins are many, and
        each growth copies them); a buffer row that a live row points into before ``length``
        is never written again."""
        if not isinstance(other, PointerCache) or other.length or other.origin is None:
            raise ValueError("rows joining a compiled decode must be a new pointer cache")
        assert self.origin is not None
        n, (rows, more) = self.length, (self.origin.shape[0], other.origin.shape[0])
        held, heads, steps, dim = self.k.shape
        want = (grown(held, rows + more), grown(steps, n + other.k.shape[2]))
        if want != (held, steps):
            k, v = (x.new_zeros((want[0], heads, want[1], dim)) for x in (self.k, self.v))
            k[:held, :, :n], v[:held, :, :n] = self.k[:, :, :n], self.v[:, :, :n]
            self.k, self.v = k, v
        origin = self.origin.new_zeros((rows + more, want[1]))
        origin[:rows, : self.origin.shape[1]] = self.origin
        origin[rows:, n:] = torch.arange(rows, rows + more, device=origin.device)[:, None]
        self.origin = origin

    def compact(self, steps: int) -> None:
        """Forget the first ``steps`` slots: every buffer row's positions and every row's
        pointers move ``steps`` slots back."""
        assert self.origin is not None
        n = self.length
        super().compact(steps)
        self.origin[:, : n - steps] = self.origin[:, steps:n].clone()

    def nbytes(self) -> int:
        return super().nbytes() + (0 if self.origin is None else self.origin.nbytes)
