"""Batched generation with the model's KV cache: ``generate(models, src, config)``, the one
entry point, and the table of searches behind it.

A search is a :class:`~mtkit.decoding.stepper.Stepper` in a module of its own; which one runs
is resolved from the options (:func:`search_kind`) and looked up in :data:`SEARCHES`. Several
models form an ensemble that averages their log-probabilities at each step
(:class:`~mtkit.decoding.ensemble.Ensemble`). The encoder runs once per batch, cross-attention
keys/values are computed once per source sentence and held once (a sentence's beams attend to
them together, after a first step that runs one row per sentence), and every step feeds only
the newest token (``decode_step``). Sentences that finish leave the batch, so the work shrinks
as they end. A new search is one module (a Stepper with its ``check``) and one row here.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from mtkit.config import SearchConfig
from mtkit.decoding.constraints import Constraints
from mtkit.decoding.ensemble import Ensemble
from mtkit.decoding.hypotheses import Hypothesis
from mtkit.decoding.protocol import StepDecoder
from mtkit.decoding.stepper import Stepper, run

if TYPE_CHECKING:
    from mtkit.decoding.speculative import Draft

# a resolved search kind -> the module and class of its stepper (imported when used)
SEARCHES: dict[str, tuple[str, str]] = {
    "greedy": ("mtkit.decoding.greedy", "GreedySearch"),
    "sampling": ("mtkit.decoding.greedy", "SamplingSearch"),
    "beam": ("mtkit.decoding.beam_search", "BeamSearch"),
    "constrained": ("mtkit.decoding.constrained", "ConstrainedSearch"),
    "speculative": ("mtkit.decoding.speculative", "SpeculativeSearch"),
}


LOOP_STOPS = ("greedy", "beam")  # the searches that stop inputs caught in a loop, asked to


def search_kind(config: SearchConfig, constrained: bool = False, draft: bool = False) -> str:
    """Which search the options ask for: ``constrained`` (lines with target phrases, at any
    width), ``sampling``, ``speculative`` (greedy decoding with a draft model: a draft is used
    by greedy decoding only), ``greedy`` (beam 1) or ``beam``."""
    if constrained:
        return "constrained"
    if config.sampling:
        return "sampling"
    if config.width == 1:
        return "speculative" if draft else "greedy"
    return "beam"


def stepper_class(kind: str) -> type[Stepper]:
    """The stepper of search ``kind`` (a key of :data:`SEARCHES`)."""
    module, name = SEARCHES[kind]
    return getattr(importlib.import_module(module), name)


def check(config: SearchConfig, constrained: bool = False, draft: bool = False) -> None:
    """Refuse options the search they resolve to cannot honour (a one-line MtkitError); a
    draft model is checked against the options as if every line were greedy-decoded with it."""
    if draft:
        stepper_class("speculative").check(config)
    stepper_class(search_kind(config, constrained, draft)).check(config)


def generate(
    models: list[StepDecoder],
    src: Tensor,
    config: SearchConfig,
    generator: torch.Generator | None = None,
    constraints: Sequence[Constraints] | None = None,
    draft: Draft | None = None,
    stop_loops: bool = False,
) -> list[list[Hypothesis]]:
    """Translate src (B, S), rows = ids + EOS right-padded with PAD; per row, best first.

    Special ids (start token, EOS, PAD, UNK) are the models' ``special_ids``
    (:class:`~mtkit.data.tokenizer.SpecialIds`; mtkit's defaults for a model without them).

    Beam search for ``beam > 1``, greedy for ``beam == 1``, sampling with ``config.sampling``
    (``generator``, or one seeded with ``config.seed``). Returns ``config.nbest`` hypotheses per
    row (fewer only if fewer finite-score hypotheses exist, as with tiny vocabularies).
    Models in training mode are switched to eval mode for the call and back afterwards.

    ``constraints`` (one per row) make it a lexically constrained beam search
    (:mod:`mtkit.decoding.constrained`; at any width, beam 1 included), which sampling is not.

    ``draft`` (a small model with the same vocabularies) makes greedy decoding speculative
    (:mod:`mtkit.decoding.speculative`): the same output, fewer passes of the models; searches
    other than plain greedy decoding do not use it.

    ``stop_loops``: greedy decoding and beam search stop an input caught in a loop
    (:meth:`~mtkit.decoding.stepper.Stepper.stop_loops`), for a caller that retries it.
    """
    training = [m.training for m in models]
    try:
        for m in models:
            m.eval()
        with torch.inference_mode():
            search = start_search(
                models, src, config, generator, constraints, draft, stop_loops=stop_loops
            )
            return run(search)
    finally:
        for m, mode in zip(models, training, strict=True):
            m.train(mode)


def start_search(
    models: list[StepDecoder],
    src: Tensor,
    config: SearchConfig,
    generator: torch.Generator | None = None,
    constraints: Sequence[Constraints] | None = None,
    draft: Draft | None = None,
    joining: bool = False,
    stop_loops: bool = False,
) -> Stepper:
    """The search :func:`generate` runs, started over src (models in eval mode, under
    ``torch.inference_mode``); ``joining``: a greedy or beam search built to take inputs
    joining it (:func:`joinable`), as a scheduler runs them; ``stop_loops``: see
    :func:`generate`."""
    stepper = _started(models, src, config, generator, constraints, draft, joining)
    if stop_loops and stepper.kind in LOOP_STOPS:
        stepper.stop_loops(src.to(stepper.device))
    return stepper


def _started(
    models: list[StepDecoder],
    src: Tensor,
    config: SearchConfig,
    generator: torch.Generator | None,
    constraints: Sequence[Constraints] | None,
    draft: Draft | None,
    joining: bool,
) -> Stepper:
    kind = search_kind(config, constraints is not None, draft is not None)
    search = stepper_class(kind)
    search.check(config)
    ens = Ensemble(models)
    src = src.to(next(models[0].parameters()).device)
    if kind == "beam" and joining:
        return search(ens, src, config, wide=True)
    if kind == "sampling" and generator is None:
        generator = torch.Generator(src.device).manual_seed(config.seed)
    # what a search takes beside the models, the batch and the options
    given = {"sampling": generator, "constrained": constraints, "speculative": draft}
    return search(ens, src, config, *([given[kind]] if kind in given else []))


def joinable(config: SearchConfig, constrained: bool = False, draft: bool = False) -> bool:
    """Whether the search these options resolve to takes inputs joining it between steps."""
    return stepper_class(search_kind(config, constrained, draft)).joinable
