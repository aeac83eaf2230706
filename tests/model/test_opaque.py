"""Opaque linear layers (``mtkit::linear``): eagerly and through the operator, with the C++
kernel and the Python one, exactly the prepared layer they replace."""

from __future__ import annotations

import pytest
import torch
from model_helpers import tiny

from mtkit.model import linear_kernel
from mtkit.model.inference import prepare_for_inference
from mtkit.model.opaque import OpaqueLinear, bind, opaque_layer, python_kernel, running
from mtkit.model.packed import onednn_available, replace_modules

pytestmark = pytest.mark.usefixtures("one_thread")
CPU = torch.device("cpu")


@pytest.mark.parametrize("kind", ["int8", "fp32", "bf16"])
def test_opaque_linear_is_the_layer_it_replaces(kind: str, tmp_path) -> None:
    """Eagerly and through the custom operator (as a graph calls it), an opaque layer returns
    exactly what the prepared layer returns."""
    if kind != "int8" and not onednn_available(torch.float32 if kind == "fp32" else torch.bfloat16):
        pytest.skip(f"no oneDNN {kind} kernels in this build")
    dtype, quantize = ("fp32", "int8") if kind == "int8" else (kind, "")
    model = prepare_for_inference(tiny(), CPU, dtype, quantize)
    layer = model.decoder[0].ffn
    x = torch.randn(5, 3, 32)
    with torch.inference_mode():
        before = layer(x)
        replace_modules(model, opaque_layer)
        assert all(isinstance(m, OpaqueLinear) for m in (layer.fc1, layer.fc2)), layer
        assert torch.equal(layer(x), before)
        layer.fc1.slot, layer.fc2.slot = 1, 0
        linears, dtype = [layer.fc2, layer.fc1], torch.bfloat16 if kind == "bf16" else x.dtype
        handle = bind(linears, tmp_path)
        # the operator as its kernel serves it (C++ where built), then the Python kernel
        for linear in (torch.ops.mtkit.linear, python_kernel):
            with running(linears, handle):
                hidden = layer.act(linear(x.to(dtype), 1).float())  # bf16: the graph rounds
                assert torch.equal(linear(hidden.to(dtype), 0).float(), before)
        if handle >= 0:
            linear_kernel.release(handle)
