"""CPU inference with linear layers whose weights are packed once for oneDNN's matmul.

PyTorch's default CPU matmul (MKL's sgemm) packs each weight into its blocked layout on every
call, and on some x86 CPUs (AMD's among them) takes slower code paths than oneDNN does. Decoding
calls every linear layer of the decoder once per step with a few hundred rows, so packing the
weights once (as PyTorch's own compiler does for frozen CPU graphs) makes each step cheaper; the
output projection over the vocabulary gains the most. On this project's 2-core AMD EPYC machine
beam search ran 1.20x faster with packed weights (benchmarks/bench_engines.py). Results agree
with ``F.linear`` to float32 rounding (a different summation order).

Inference only: packed layers hold no parameters and no gradients.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from mtkit.model.transformer import Transformer

_BATCH_HINT = 128  # rows per call the packed layout is tuned for; any row count works


def onednn_available() -> bool:
    """True where this PyTorch build can pack linear weights for oneDNN and run them."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        weight, x = torch.randn(3, 2), torch.randn(1, 2)
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, _BATCH_HINT)
        y = torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
    except (AttributeError, RuntimeError):
        return False
    return torch.allclose(y, F.linear(x, weight), atol=1e-5)


class PackedLinear(nn.Module):
    """``y = x W^T + b`` for float32 CPU inputs of any leading shape, W packed for oneDNN."""

    def __init__(self, weight: Tensor, bias: Tensor | None) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        # an opaque oneDNN tensor: a plain attribute, outside state_dict and .to()
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), _BATCH_HINT)
        self.bias = None if bias is None else bias.detach().clone()

    def forward(self, x: Tensor) -> Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, onednn"


def pack_linears(model: Transformer) -> Transformer:
    """In place, for CPU float32 inference: every nn.Linear becomes a :class:`PackedLinear`
    (untie a tied output projection first to pack it too). Returns the model."""
    targets = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    for name, linear in targets:
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, attr, PackedLinear(linear.weight, linear.bias))
    return model.eval()
