"""What the search needs from a model, written down: encode, start a state, step, reorder.

Any model with these methods decodes with :func:`mtkit.decoding.search.generate`: mtkit's
Transformer and its variants, a quantized or packed copy of one, or a scripted stand-in in the
tests. The decoding state is the model's own business; the search only asks it to keep rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from torch import Tensor, nn


class DecodingState(Protocol):
    def reorder(self, rows: Tensor, sources: Tensor | None = None) -> None:
        """Keep rows ``rows`` (R',), in that order. ``sources`` (N',), when given, selects the
        source rows too, each shared by ``R' / N'`` adjacent rows (one sentence's beams);
        without it rows only move among the beams of their own sentence."""


class StepDecoder(Protocol):
    """An encoder-decoder that decodes one token per row and step."""

    training: bool
    # a multilingual vocabulary's target-language tags, which do not count as source pieces in
    # the length limit (max_len_a); () for a model without such tags
    tag_ids: tuple[int, ...]
    # optional: ``special_ids`` (mtkit.data.tokenizer.SpecialIds), the start token, EOS, PAD and
    # UNK of the model's vocabulary; the search uses mtkit's fixed ids for a model without it

    @property
    def max_positions(self) -> int: ...

    @property
    def tgt_vocab_size(self) -> int: ...

    def encode(self, src: Tensor) -> Any:
        """Encode src (B, S), rows right-padded; the result feeds :meth:`start_state`."""

    def start_state(self, encoded: Any, max_len: int) -> DecodingState:
        """A fresh state for one row per source and up to ``max_len`` steps."""

    def decode_step(self, tokens: Tensor, state: Any) -> Tensor:
        """Feed one token per row (R,); returns next-token logits (R, V); advances ``state``."""

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]: ...

    def train(self, mode: bool = True) -> Any: ...
