"""The compiled training step (``mtkit train --compile``): the forward pass and the loss as one
``torch.compile`` graph, the backward pass as the graph AOTAutograd derives from it.

One graph serves every batch: the batch, source and target dimensions are dynamic (inductor's
kernels take them as arguments), and duck sizing is off while tracing, so that a source and a
target of equal length in the first batch do not become a guard that later batches fail. A
dimension of size 1 (a pair alone in its batch, a one-piece target) specialises, as in every
torch.compile graph: at most a few graphs in a run, each compiled once and then served from
inductor's cache on disk (a resumed or repeated run compiles nothing it has compiled before).
``fullgraph``: a part of the model that would break the graph is an error at the first update,
not a silent slow path (every variant of tests/variants.py traces whole). A second model of the
same configuration in one process reuses the graph: only a new configuration traces again.

Dropout draws its masks with torch's own generator (inductor's ``fallback_random``): the
compiled step draws exactly the masks eager draws from the same random state, so its losses
equal eager's to float rounding and the random states the checkpoints keep are all that an exact
resume needs. (Inductor's own generator was also slower on CPU: 0.95x against 1.02x eager.)

Python floats the model passes to torch (dropout's probability, attention's scale) are constants
of the graph from the start (dynamo's ``specialize_float``): left to dynamo's default, a first
trace made them inputs, found them specialised by torch's argument parser and traced the whole
model again (transformer-base on 2 cores: 149 s of compiling, 109 s without the second trace).

Views are recomputed in the backward pass (functorch's ``recompute_views``): without it the
partitioner kept each ReLU's mask, a boolean tensor, beside the ReLU's output, and inductor's CPU
kernels write booleans 15-30x slower than ATen (torch 2.13): 0.77x eager on 2 cores, 0.90x now.

``auto``'s choice per device and why: :data:`AUTO_REASONS` (CPU: measured; CUDA: from an eager
demo step on an H200 that left the GPU idle most of the time, its compiled figure still owed).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch
import torch._dynamo.config as dynamo_config
import torch._functorch.config as functorch_config
import torch.fx.experimental._config as fx_config
from torch import Tensor, nn

from mtkit.config import COMPILE_MODES
from mtkit.errors import MtkitError
from mtkit.model.transformer import Transformer
from mtkit.training.distributed import autocast
from mtkit.training.loss import label_smoothed_nll_loss, projected_label_smoothed_nll_loss

# auto's choice per device type, and why (CPU: bench_train.py --tools mtkit,mtkit-compiled)
AUTO_REASONS = {
    "cuda": (True, "auto: on CUDA, where a small model's eager step is bound by kernel launches"),
    "cpu": (
        False,
        "auto: on CPU the compiled step measured 0.74-1.15x eager after 70-110 s of compiling "
        "on 2 cores (matrix products, which compiling does not change, take most of a step)",
    ),
}


class Compiling(NamedTuple):
    """Whether the training step is compiled, and why."""

    on: bool
    reason: str


def resolve_compile(mode: str, device: torch.device) -> Compiling:
    """``--compile`` (:data:`COMPILE_MODES`) on ``device``."""
    if mode not in COMPILE_MODES:
        raise MtkitError(f"--compile must be one of {', '.join(COMPILE_MODES)}, got {mode!r}")
    if mode != "auto":
        return Compiling(mode == "on", "as asked")
    return Compiling(*AUTO_REASONS["cuda" if device.type == "cuda" else "cpu"])


BACKEND = "inductor"  # the tests' "aot_eager": the same graphs, run by eager kernels

LossFn = Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor]]


def loss_function(
    net: nn.Module,
    epsilon: float,
    pad: int,
    device: torch.device,
    dtype: torch.dtype | None,
    model: Transformer | None = None,
    compiled: Compiling | None = None,
    fullgraph: bool = True,
) -> LossFn:
    """(src, tgt_in, tgt_out) -> (smoothed loss sum, nll sum) of ``net``'s teacher-forced pass,
    the pass under autocast to ``dtype`` (None: fp32), the loss in fp32.

    Given ``model`` (the Transformer inside ``net``), the loss projects ``net``'s hidden states
    into the vocabulary itself, a block of rows at a time
    (:func:`projected_label_smoothed_nll_loss`; what training on CPU does), and ``compiled``
    makes a graph of the pass up to those states; without ``model``, of the pass and the loss
    (:func:`compile_graph`, ``fullgraph`` as there)."""

    def loss(src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> tuple[Tensor, Tensor]:
        with autocast(device, dtype):
            logits = net(src, tgt_in)  # (B, T, V)
        return label_smoothed_nll_loss(logits, tgt_out, epsilon, pad)

    def hidden(src: Tensor, tgt_in: Tensor) -> Tensor:
        with autocast(device, dtype):
            return net(src, tgt_in, project=False)  # (B, T, D)

    compiling = compiled is not None and compiled.on
    if model is None:
        return compile_graph(loss, fullgraph) if compiling else loss
    states = compile_graph(hidden, fullgraph) if compiling else hidden

    def projected(src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> tuple[Tensor, Tensor]:
        weight, bias = model.output_weight, model.output_bias
        return projected_label_smoothed_nll_loss(
            states(src, tgt_in), weight, tgt_out, epsilon, pad, bias, dtype
        )

    return projected


@contextlib.contextmanager
def tracing_options() -> Iterator[None]:
    """The options the training graphs are traced with (see the module docstring): no duck
    sizing, views recomputed in the backward pass, Python floats the graph's constants."""
    with (
        fx_config.patch(use_duck_shape=False),
        functorch_config.patch(recompute_views=True),
        dynamo_config.patch(specialize_float=True),
    ):
        yield


def compile_graph(fn: Callable[..., Any], fullgraph: bool = True) -> Callable[..., Any]:
    """``fn`` of tensors as one dynamic-shape graph (see the module docstring). ``fullgraph``
    False under DDP, whose graph dynamo splits at the gradient buckets."""
    options = {"fallback_random": True} if BACKEND == "inductor" else None
    graph = torch.compile(fn, backend=BACKEND, dynamic=True, fullgraph=fullgraph, options=options)

    def compiled(*tensors: Tensor) -> Any:
        with tracing_options():
            return graph(*tensors)

    return compiled
