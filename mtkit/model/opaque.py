"""Linear layers whose prepared weights cannot be traced, inside a compiled decoding step
(:mod:`mtkit.model.compiled`): :class:`OpaqueLinear` and the custom operator ``mtkit::linear``
through which a graph calls them.

Linear layers prepared for a CPU library (int8 ``torch.ao`` dynamic quantization on fbgemm,
weights packed for oneDNN) hold opaque objects; each becomes an :class:`OpaqueLinear`, which
eagerly calls its kernel and inside a graph calls ``mtkit::linear(x, slot)`` with its number in
its model. The operator's CPU kernel is C++ (:mod:`mtkit.model.linear_kernel`: a model's layers
bound once, activated per step and thread), or, where that cannot be built, Python (the running
model's layers in a thread-local list). Either way the layer's own kernel computes it.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from mtkit.errors import MtkitError
from mtkit.model import linear_kernel
from mtkit.model.packed import PackedLinear

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}  # PackedLinear's, by kind
_KINDS = {dtype: kind for kind, dtype in _DTYPES.items()}
_SERVED: list[bool] = []  # [True]: the C++ kernel serves; [False]: the Python one
_ACTIVE = threading.local()  # .linears: the OpaqueLinears of the model whose graph runs


class OpaqueLinear(nn.Module):
    """A linear layer whose prepared weight cannot be traced: eagerly, its kernel; in a graph,
    ``mtkit::linear`` with the layer's number in its model (the same kernel)."""

    def __init__(self, kind: str, weight: Any, bias: Tensor | None, out_features: int) -> None:
        super().__init__()
        self.kind, self.out_features = kind, out_features
        self.kernel = (weight, bias)  # in a tuple: what export looks for in a module it skips
        self.slot = 0  # its number among its model's OpaqueLinears (compile_step numbers them)

    def run(self, x: Tensor) -> Tensor:
        weight, bias = self.kernel
        if self.kind == "int8":  # what torch.ao's DynamicQuantizedLinear (version 4) calls
            return torch.ops.quantized.linear_dynamic(x, weight, reduce_range=True)
        return PackedLinear.run(x, weight, bias, _DTYPES[self.kind])

    def forward(self, x: Tensor) -> Tensor:
        if torch.compiler.is_compiling():  # bf16: the casts in the graph, fused with their
            dtype = _DTYPES.get(self.kind, x.dtype)  # neighbours (the kernel's own rounding)
            return torch.ops.mtkit.linear(x.to(dtype), self.slot).to(x.dtype)
        return self.run(x)

    def extra_repr(self) -> str:
        return f"out_features={self.out_features}, {self.kind}, slot={self.slot}"


# mtkit::linear(x, slot): the running model's OpaqueLinear number ``slot`` on x. Defined with
# the plain Library API: torch.library.custom_op's kernels import dynamo (~2.5 s) on first call.
# Its CPU kernel: C++ (mtkit.model.linear_kernel), else Python (serve_kernel registers one of them)
_LIBRARY = torch.library.Library("mtkit", "DEF")
_LIBRARY.define("linear(Tensor x, int slot) -> Tensor")


@torch.library.register_fake("mtkit::linear", lib=_LIBRARY)
def _(x: Tensor, slot: int) -> Tensor:
    return x.new_empty((*x.shape[:-1], _ACTIVE.linears[slot].out_features))


def serve_kernel(folder: Path) -> bool:
    """Register ``mtkit::linear``'s CPU kernel, once a process: True for the C++ one (built
    into ``folder`` on first use), False where it cannot be built (one line says why) and the
    Python one serves."""
    if _SERVED:
        return _SERVED[0]
    why = linear_kernel.load(folder)
    _SERVED.append(not why)
    if not why:
        return True
    print(
        f"mtkit: warning: --compile: the C++ kernel of the compiled step's linear layers "
        f"could not be built ({why}); a slower Python one serves",
        file=sys.stderr,
        flush=True,
    )
    _LIBRARY.impl("linear", python_kernel, "CPU")
    return False


def python_kernel(x: Tensor, slot: int) -> Tensor:
    """``mtkit::linear`` in Python: the running model's layer ``slot`` (see :func:`running`)."""
    return _ACTIVE.linears[slot].run(x)


def bind(linears: list[OpaqueLinear], folder: Path) -> int:
    """A model's opaque layers (numbered) bound to the C++ kernel: their handle (the caller
    releases it), or -1 where the Python kernel serves or there are none (``folder``: where
    the C++ kernel is built, see :func:`serve_kernel`)."""
    if not (serve_kernel(folder) and linears):
        return -1
    handle = next(_HANDLES)
    for layer in linears:
        linear_kernel.bind(handle, layer.slot, layer.kind, *layer.kernel)
    return handle


_HANDLES = itertools.count()  # models bound to the C++ kernel, by number


@contextlib.contextmanager
def running(linears: list[OpaqueLinear], handle: int = -1) -> Iterator[None]:
    """``mtkit::linear`` calls these layers (by number) while a model's graph runs: the Python
    kernel finds them here, the C++ kernel as bound under ``handle`` (-1: none)."""
    before = getattr(_ACTIVE, "linears", None)
    _ACTIVE.linears = linears
    cpp_before = linear_kernel.activate(handle) if handle >= 0 else -1
    try:
        yield
    finally:
        _ACTIVE.linears = before
        if handle >= 0:
            linear_kernel.activate(cpp_before)


def opaque_layer(module: nn.Module) -> OpaqueLinear | None:
    """The :class:`OpaqueLinear` that stands for ``module``, or None for a traceable layer."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

    if isinstance(module, DynamicQuantizedLinear):
        if module._packed_params.dtype != torch.qint8 or (module.version or 0) < 4:
            raise MtkitError("--compile: only int8 dynamic quantization (mtkit's) is supported")
        weight = module._packed_params._packed_params
        return OpaqueLinear("int8", weight, None, module.out_features)
    if isinstance(module, PackedLinear):
        return OpaqueLinear(_KINDS[module.dtype], module.packed, module.bias, module.out_features)
    return None
