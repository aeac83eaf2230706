"""CPU inference with linear layers whose weights are packed once for oneDNN's matmul.

PyTorch's default CPU matmul (MKL's sgemm) packs each weight into its blocked layout on every
call, and on some x86 CPUs (AMD's among them) takes slower code paths than oneDNN does. Decoding
calls every linear layer of the decoder once per step with a few hundred rows, so packing the
weights once (as PyTorch's own compiler does for frozen CPU graphs) makes each step cheaper; the
output projection over the vocabulary gains the most. On this project's 2-core AMD EPYC machine
beam search ran 1.20x faster with packed weights (benchmarks/bench_engines.py). Results agree
with ``F.linear`` to float32 rounding (a different summation order).

With ``dtype=torch.bfloat16`` (``--dtype bf16`` on CPU) the weights are packed in bf16 and
each layer computes as autocast would: the input is rounded to bf16, oneDNN multiplies in bf16
and accumulates in fp32 (AVX512-BF16 or AMX instructions where the CPU has them), and the output
comes back as float32, so everything between the linear layers (norms, softmax, attention,
the search) stays float32. Without oneDNN, :class:`Bf16Linear` does the same with ``F.linear``.

Inference only: packed layers hold no parameters and no gradients.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from mtkit.model.transformer import Transformer

_BATCH_HINT = 128  # rows per call the packed layout is tuned for; any row count works


def onednn_available(dtype: torch.dtype = torch.float32) -> bool:
    """True where this PyTorch build can pack linear weights of ``dtype`` for oneDNN and run
    them (float32, or bfloat16 where oneDNN has bf16 kernels for this CPU)."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        if dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            return False
        weight, x = torch.tensor([[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]]), torch.ones(1, 2)
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.to(dtype), _BATCH_HINT)
        y = torch.ops.mkldnn._linear_pointwise(x.to(dtype), packed, None, "none", [], "")
    except (AttributeError, RuntimeError):
        return False
    return torch.allclose(y.float(), F.linear(x, weight), atol=1e-5)


def bucketed(rows: int) -> int:
    """The rows a bf16 packed layer computes for ``rows`` (zero rows after them): a multiple
    of 8 up to 64, of 16 up to 256, of 64 above. oneDNN builds a kernel for every row count
    (0.2-0.5 ms for AMX's) and keeps 1,024; a server's steps and encoder calls bring thousands
    of counts, so without buckets it builds them again and again. Every count of a bucket
    gives its rows the same values (a row's last bits may differ between buckets, as they
    differ between counts without them: oneDNN's kernel depends on the count)."""
    step = 8 if rows <= 64 else 16 if rows <= 256 else 64
    return -(-rows // step) * step


class PackedLinear(nn.Module):
    """``y = x W^T + b`` for float32 CPU inputs of any leading shape, W packed for oneDNN in
    ``dtype`` (float32, or bfloat16: input rounded to bf16, float32 output)."""

    def __init__(
        self, weight: Tensor, bias: Tensor | None, dtype: torch.dtype = torch.float32
    ) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.dtype = dtype
        # an opaque oneDNN tensor: a plain attribute, outside state_dict and .to()
        weight = weight.detach().to(dtype)
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, _BATCH_HINT)
        self.bias = None if bias is None else bias.detach().to(dtype).clone()

    def forward(self, x: Tensor) -> Tensor:
        return self.run(x, self.packed, self.bias, self.dtype)

    @staticmethod
    def run(x: Tensor, packed: Tensor, bias: Tensor | None, dtype: torch.dtype) -> Tensor:
        """``x W^T + b`` with W packed in ``dtype``: the layer's computation, for callers that
        hold the packed weight themselves (:mod:`mtkit.model.compiled`)."""
        if dtype == torch.float32:
            return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")
        width = x.shape[-1]
        rows = x.numel() // width if width else 0
        flat, padded = x.reshape(rows, width).to(dtype), bucketed(rows)
        if padded != rows:  # zero rows after x's
            flat = torch.cat([flat, flat.new_zeros(padded - rows, width)])
        y = torch.ops.mkldnn._linear_pointwise(flat, packed, bias, "none", [], "")
        return y[:rows].view(*x.shape[:-1], -1).to(x.dtype)

    def extra_repr(self) -> str:
        kind = "onednn" if self.dtype == torch.float32 else "onednn bf16"
        return f"in_features={self.in_features}, out_features={self.out_features}, {kind}"


class Bf16Linear(nn.Module):
    """``y = x W^T + b`` computed in bf16 (input rounded, W held in bf16), output in the input's
    dtype: autocast's rule for one layer, where oneDNN cannot pack bf16 weights."""

    def __init__(self, weight: Tensor, bias: Tensor | None) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.register_buffer("weight", weight.detach().to(torch.bfloat16))
        self.register_buffer("bias", None if bias is None else bias.detach().to(torch.bfloat16))

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x.to(torch.bfloat16), self.weight, self.bias).to(x.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bf16"


def pack_linears(model: Transformer, dtype: torch.dtype = torch.float32) -> Transformer:
    """In place, for CPU inference: every nn.Linear becomes a :class:`PackedLinear` of ``dtype``
    (untie a tied output projection first to pack it too). Returns the model."""
    return _replace_linears(model, lambda m: PackedLinear(m.weight, m.bias, dtype))


def bf16_linears(model: Transformer) -> Transformer:
    """In place: every nn.Linear becomes a :class:`Bf16Linear`. Returns the model."""
    return _replace_linears(model, lambda m: Bf16Linear(m.weight, m.bias))


def _replace_linears(model: Transformer, make: Callable[[nn.Linear], nn.Module]) -> Transformer:
    return replace_modules(model, lambda m: make(m) if isinstance(m, nn.Linear) else None)


def replace_modules(model: nn.Module, make: Callable[[nn.Module], nn.Module | None]) -> nn.Module:
    """In place: every submodule for which ``make`` returns a module is replaced by it (None:
    kept). Returns the model in eval mode."""
    found = [(name, make(m)) for name, m in model.named_modules() if name]
    for name, new in found:
        if new is not None:
            parent_name, _, attr = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, attr, new)
    return model.eval()
