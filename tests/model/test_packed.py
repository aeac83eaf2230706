"""oneDNN-packed linear layers: the same function as nn.Linear, for CPU float32 inference."""

import pytest
import torch
from model_helpers import batch, tiny
from torch import nn
from variants import variant_params

from mtkit.data.tokenizer import BOS_ID
from mtkit.model.inference import untie_output
from mtkit.model.packed import (
    Bf16Linear,
    PackedLinear,
    bucketed,
    onednn_available,
    pack_linears,
)

pytestmark = pytest.mark.skipif(not onednn_available(), reason="no oneDNN in this torch build")


@pytest.mark.parametrize("shape", [(1, 16), (7, 16), (3, 5, 16), (300, 16)])
@pytest.mark.parametrize("bias", [True, False])
def test_packed_linear_equals_linear(shape: tuple[int, ...], bias: bool) -> None:
    torch.manual_seed(0)
    linear = nn.Linear(16, 40, bias=bias)
    x = torch.randn(shape)
    with torch.inference_mode():
        torch.testing.assert_close(
            PackedLinear(linear.weight, linear.bias)(x), linear(x), atol=1e-5, rtol=1e-5
        )


@pytest.mark.parametrize("variant", variant_params())
def test_packed_model_equals_the_model_full_and_cached(variant: dict) -> None:
    model, packed = tiny(**variant), pack_linears(untie_output(tiny(**variant)))
    assert not any(isinstance(m, nn.Linear) for m in packed.modules())
    assert isinstance(packed.output, PackedLinear)  # the tied output projection too
    src = batch([7, 4, 5], 23)
    tgt = torch.cat([torch.full((3, 1), BOS_ID), batch([6, 6, 6], 29, seed=2)], dim=1)
    with torch.inference_mode():
        full = model(src, tgt)
        torch.testing.assert_close(packed(src, tgt), full, atol=1e-5, rtol=1e-5)
        cache = packed.start_state(packed.encode(src), max_len=tgt.shape[1])
        for t in range(tgt.shape[1]):
            step = packed.decode_step(tgt[:, t], cache)
            torch.testing.assert_close(step, full[:, t], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("packed", [True, False])
def test_bf16_linears_compute_as_autocast(packed: bool) -> None:
    """Input and weight rounded to bf16, products summed in fp32, output float32."""
    if packed and not onednn_available(torch.bfloat16):
        pytest.skip("no oneDNN bf16 kernels in this build")
    torch.manual_seed(0)
    linear = nn.Linear(64, 48)
    x = torch.randn(2, 5, 64)
    layer = (
        PackedLinear(linear.weight, linear.bias, torch.bfloat16)
        if packed
        else Bf16Linear(linear.weight, linear.bias)
    )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = linear(x).float()
    y = layer(x)
    assert y.dtype == torch.float32 and y.shape == (2, 5, 48)
    torch.testing.assert_close(y, expected, atol=2e-2, rtol=1e-2)
    assert (y - linear(x)).abs().max() < 0.1  # close to fp32 too


@pytest.mark.skipif(not onednn_available(torch.bfloat16), reason="no oneDNN bf16 kernels")
@pytest.mark.parametrize("features", [(256, 256), (1024, 256), (256, 800)])
def test_bf16_rows_are_computed_in_buckets(features) -> None:
    """A bf16 layer pads its rows to a bucket (a few oneDNN kernels for all row counts): every
    count of a bucket gives its rows the same values, which are oneDNN's for the bucket's count
    and autocast's to bf16 rounding."""
    assert [bucketed(n) for n in (0, 1, 8, 9, 64, 65, 256, 257, 2000)] == [
        *(0, 8, 8, 16, 64, 80, 256, 320, 2048)
    ]
    torch.manual_seed(0)
    linear = nn.Linear(*features)
    layer = PackedLinear(linear.weight, linear.bias, torch.bfloat16)
    x = torch.randn(320, features[0])
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = linear(x).float()
    with torch.inference_mode():
        for rows in (1, 7, 8, 9, 33, 40, 63, 65, 130, 257, 300):
            padded = x[: bucketed(rows)].clone()
            padded[rows:] = 0
            raw = torch.ops.mkldnn._linear_pointwise(
                padded.bfloat16(), layer.packed, layer.bias, "none", [], ""
            )
            assert torch.equal(layer(x[:rows]), raw[:rows].float())
            assert torch.equal(layer(x[:rows]), layer(x[: bucketed(rows)])[:rows])
            torch.testing.assert_close(layer(x[:rows]), expected[:rows], atol=2e-2, rtol=2e-2)
        assert torch.equal(layer(x[:21].view(3, 7, -1)), layer(x[:21]).view(3, 7, -1))
