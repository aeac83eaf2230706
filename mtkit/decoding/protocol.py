"""What the searches need from a model, written down: encode, start a state, step, and the
state's row bookkeeping (reorder, truncate, the recorded attention).

Any model with these methods decodes with :func:`mtkit.decoding.search.generate`: mtkit's
Transformer and its variants, a quantized or packed copy of one, or a scripted stand-in in the
tests. The decoding state is the model's own business; a search only asks it to keep rows, to
forget positions (speculative decoding) and for a row's cross-attention (word alignments).
Nothing else is read from a model or a state, by any search.
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

    def truncate(self, length: int) -> None:
        """Forget every position from ``length`` on, all rows alike (speculative decoding
        rolls back to the accepted tokens); the next token goes at ``length``."""

    def join(self, other: Any) -> None:
        """Add the rows of ``other``, a state just started over new sources, after these: from
        the next step on they are decoded with them, each as if alone (a state that cannot
        raises ValueError; a search joins rows only where its engine says the models can)."""

    def compact(self) -> int:
        """Forget the positions no row reads any more (slots before every joined row's first),
        or wait until more of them are; returns how many were dropped (0 where none)."""

    def attended(self, row: int) -> Tensor | None:
        """Row ``row``'s cross-attention at each step so far (steps, S), as the state recorded
        it (``Transformer.start_state``'s alignment layer); None where it records none."""


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

    def decode_steps(self, tokens: Tensor, state: Any) -> Tensor:
        """Feed n tokens per row (R, n) at once; returns the logits after each (R, n, V)
        (speculative decoding only: a model without it decodes every other search)."""

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]: ...

    def train(self, mode: bool = True) -> Any: ...
