"""Inference preparation over every variant: int8 quantization reaches every matmul weight and
agrees with float32; the decoding state's size per sentence (grouped-query caches are
kv_heads / heads of multi-head ones); what --dtype means on a device (``resolve_dtype``), from
made-up CPU flag sets."""

import pytest
import torch
from model_helpers import batch, tiny
from torch import nn
from variants import variant_params

from mtkit.data.tokenizer import BOS_ID
from mtkit.model.inference import cache_bytes_per_sentence, quantize_int8
from mtkit.precision import resolve_dtype

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("variant", variant_params())
def test_int8_model_agrees_with_float32_full_and_cached(variant: dict) -> None:
    """Dynamic int8 (weights and per-batch activations) moves tiny random models' log-probs
    by about 0.1; a variant whose matmul escaped quantization or broke would not stay close."""
    model, int8 = tiny(**variant), quantize_int8(tiny(**variant))
    assert not any(type(m) is nn.Linear for m in int8.modules())  # every matmul weight is int8
    src = batch([7, 4, 5], 23)
    tgt = torch.cat([torch.full((3, 1), BOS_ID), batch([6, 6, 6], 29, seed=2)], dim=1)
    with torch.inference_mode():
        full = model(src, tgt).log_softmax(-1)
        torch.testing.assert_close(int8(src, tgt).log_softmax(-1), full, atol=0.3, rtol=0)
        state = int8.start_state(int8.encode(src), max_len=tgt.shape[1])
        steps = [int8.decode_step(tgt[:, t], state) for t in range(tgt.shape[1])]
        cached = torch.stack(steps, dim=1).log_softmax(-1)
    torch.testing.assert_close(cached, full, atol=0.3, rtol=0)
    assert (cached.argmax(-1) == full.argmax(-1)).float().mean() >= 0.85


def test_cache_bytes_per_sentence() -> None:
    """4 bytes x (self-attention k and v: Hkv x Dh x steps per row + cross-attention k and v:
    Hkv x Dh x src_len) per decoder layer; the average attention keeps D per row."""
    steps, src_len, beam, layers, dh = 6, 5, 3, 2, 8

    def expected(kv_heads: int, self_per_row: int | None = None) -> int:
        own = self_per_row if self_per_row is not None else 2 * kv_heads * dh * steps
        return 4 * layers * (beam * own + 2 * kv_heads * dh * src_len)

    def measured(**variant) -> int:
        return cache_bytes_per_sentence(tiny(**variant), src_len, steps, beam)

    assert measured() == expected(4)
    assert measured(kv_heads=2) == expected(2)
    assert measured(kv_heads=1) == expected(1)
    assert measured(decoder_self_attention="average") == expected(4, self_per_row=32)


AVX2 = frozenset({"avx2"})
AMX = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8"})


@pytest.mark.parametrize(
    "device, dtype, quantize, flags, name, words, warns",
    [
        ("cpu", "fp32", "", AVX2, "fp32", "as asked", False),
        ("cpu", "bf16", "", AVX2, "bf16", "as asked", True),
        ("cpu", "bf16", "", AMX, "bf16", "as asked", False),
        ("cpu", "auto", "", AVX2, "fp32", "auto: this CPU has no bf16 hardware", False),
        ("cpu", "auto", "int8", AMX, "fp32", "auto: int8 quantization", False),
        ("cuda", "auto", "", AMX, "fp32", "auto: fp32 on CUDA", False),
        ("cuda", "fp16", "", AVX2, "fp16", "as asked", False),
    ],
)
def test_resolve_dtype(device, dtype, quantize, flags, name, words, warns) -> None:
    resolved = resolve_dtype(device, dtype, quantize, flags)
    assert resolved.name == name and words in resolved.reason
    assert bool(resolved.warning) is warns
