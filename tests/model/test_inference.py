"""What --dtype means on a device (``resolve_dtype``), from made-up CPU flag sets."""

from __future__ import annotations

import pytest

from mtkit.model.inference import resolve_dtype

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
