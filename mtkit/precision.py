"""What ``--dtype`` means on a device: the precision policy every engine applies.

It imports no torch, so an engine that does not run mtkit's model (CTranslate2) applies the same
policy without loading it. ``auto`` on CPU is decided by :mod:`mtkit.cpu` from the CPU's flags.
"""

from __future__ import annotations

from mtkit.cpu import Resolved, cpu_flags, resolve_cpu_precision


def resolve_dtype(
    device_type: str, dtype: str, quantize: str = "", flags: frozenset[str] | None = None
) -> Resolved:
    """What ``--dtype`` means on a device of ``device_type`` (cpu or cuda), and why; with a
    warning for bf16 on a CPU without bf16 hardware. ``auto``: fp32 with int8 quantization or
    on CUDA, else what :func:`mtkit.cpu.choose_bf16` decides for decoding on this CPU."""
    if dtype == "auto" and quantize:
        return Resolved("fp32", "auto: int8 quantization computes in fp32")
    if dtype == "auto" and device_type != "cpu":
        return Resolved("fp32", "auto: fp32 on CUDA (bf16 is chosen automatically on CPU only)")
    if device_type == "cpu" and dtype in ("auto", "bf16", "fp32"):
        return resolve_cpu_precision(dtype, "decode", cpu_flags() if flags is None else flags)
    return Resolved(dtype, "as asked")
