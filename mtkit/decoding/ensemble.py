"""The models a search decodes with, as one: :class:`Ensemble` steps them in lockstep.

Several models average their log-probabilities at each step (renormalised); one model costs
nothing extra. The ensemble owns the models' decoding states, one per model, and passes the
search's row bookkeeping (reorder, truncate) on to each.
"""

from __future__ import annotations

import torch
from torch import Tensor

from mtkit.data.tokenizer import DEFAULT_SPECIAL_IDS, SpecialIds
from mtkit.decoding.protocol import DecodingState, StepDecoder
from mtkit.errors import MtkitError


class Ensemble:
    """Several models decoding in lockstep, each with its own state (one model: no overhead).

    The ensemble distribution is the renormalised mean of the models' log-probabilities.
    """

    def __init__(self, models: list[StepDecoder]) -> None:
        if not models:
            raise MtkitError("no model to decode with")
        sizes = {m.tgt_vocab_size for m in models}
        if len(sizes) > 1:
            raise MtkitError(f"ensembled models have different target vocabularies {sorted(sizes)}")
        self.models = models
        self.special_ids = special_ids_of(models)
        self.tag_ids = models[0].tag_ids  # see max_target_lengths
        self.max_positions = min(m.max_positions for m in models)
        self.tgt_vocab_size = models[0].tgt_vocab_size
        self.states: list[DecodingState] = []

    def start(self, src: Tensor, copies: int, max_len: int, shared: bool = False) -> None:
        """Encode src (B, S) and start states for B * copies rows, copies of a row adjacent:
        each with its own copy of the source state (copies that leave independently), or
        with ``shared`` all on one (a sentence's beams)."""
        self.states = [self._started(model, src, copies, max_len, shared) for model in self.models]

    def join(self, src: Tensor, copies: int, max_len: int, shared: bool = False) -> None:
        """Encode src (B, S) and add its B * copies rows (as :meth:`start` makes them) after
        the live ones of a running decode (``DecodingState.join``): from the next step on they
        are decoded with them, as if alone."""
        for model, state in zip(self.models, self.states, strict=True):
            state.join(self._started(model, src, copies, max_len, shared))

    @staticmethod
    def _started(
        model: StepDecoder, src: Tensor, copies: int, max_len: int, shared: bool
    ) -> DecodingState:
        state = model.start_state(model.encode(src), max_len)
        if copies > 1:
            inputs = torch.arange(src.shape[0], device=src.device)
            rows = inputs.repeat_interleave(copies)
            state.reorder(rows, inputs if shared else rows)
        return state

    def compact(self) -> int:
        """Drop the slots no row reads any more (rows that joined a decode, see
        ``DecodingState.compact``); returns how many (the same in every model's state)."""
        dropped = {state.compact() for state in self.states}
        if len(dropped) > 1:
            raise ValueError(f"the models' states dropped different slots: {sorted(dropped)}")
        return dropped.pop() if dropped else 0

    def step(self, tokens: Tensor) -> Tensor:
        """Feed tokens (R,); return next-token log-probabilities (R, V) in float32."""
        pairs = zip(self.models, self.states, strict=True)
        return averaged([m.decode_step(tokens, s) for m, s in pairs])

    def steps(self, tokens: Tensor) -> Tensor:
        """Feed n tokens per row at once, tokens (R, n); return the log-probabilities after each
        (R, n, V) in float32 (speculative decoding; the models need ``decode_steps``)."""
        pairs = zip(self.models, self.states, strict=True)
        return averaged([m.decode_steps(tokens, s) for m, s in pairs])

    def truncate(self, length: int) -> None:
        """Roll every model's state back to its first ``length`` positions."""
        for state in self.states:
            state.truncate(length)

    def reorder(self, rows: Tensor, sources: Tensor | None) -> None:
        """Keep rows ``rows``; ``sources`` selects the source rows they share (see
        :class:`~mtkit.decoding.protocol.DecodingState`), None when rows only move among one
        sentence's beams."""
        for state in self.states:
            state.reorder(rows, sources)

    def attended(self, row: int) -> Tensor | None:
        """Row ``row``'s cross-attention so far as the first model's state recorded it, or
        None (a state that records none)."""
        return self.states[0].attended(row) if self.states else None


def averaged(logits: list[Tensor]) -> Tensor:
    """The ensemble's log-probabilities: each model's in float32, their mean renormalised."""
    lprobs = [x.float().log_softmax(-1) for x in logits]
    if len(lprobs) == 1:
        return lprobs[0]
    return torch.stack(lprobs).mean(0).log_softmax(-1)


def special_ids_of(models: list[StepDecoder]) -> SpecialIds:
    """The models' special ids (mtkit's defaults for a model that names none); all must agree."""
    found = {getattr(m, "special_ids", DEFAULT_SPECIAL_IDS) for m in models}
    if len(found) > 1:
        raise MtkitError(f"ensembled models have different special ids {sorted(map(str, found))}")
    return found.pop()
