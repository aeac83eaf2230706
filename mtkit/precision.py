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
    on CUDA, else what :func:`mtkit.cpu.choose_bf16` decides for decoding on this CPU.
    ``fast`` (the server's default): as ``auto``, and int8 quantization where that is fp32 on
    a CPU (:attr:`Resolved.quantize`): the fastest precision with a recorded verdict.

    >>> resolve_dtype("cpu", "fast", flags=frozenset({"avx2"}))[::3]
    ('fp32', 'int8')
    >>> resolve_dtype("cpu", "fast", flags=frozenset({"avx512_bf16"}))[::3]
    ('bf16', '')
    """
    if dtype == "fast":
        found = resolve_dtype(device_type, "auto", quantize, flags)
        if device_type != "cpu" or found.name != "fp32" or quantize:
            return found._replace(reason=f"fast: {found.reason.removeprefix('auto: ')}")
        why = found.reason.removeprefix("auto: ")
        return found._replace(reason=f"fast: int8 linear layers ({why})", quantize="int8")
    if dtype == "auto" and quantize:
        return Resolved("fp32", "auto: int8 quantization computes in fp32")
    if dtype == "auto" and device_type != "cpu":
        return Resolved("fp32", "auto: fp32 on CUDA (bf16 is chosen automatically on CPU only)")
    if device_type == "cpu" and dtype in ("auto", "bf16", "fp32"):
        return resolve_cpu_precision(dtype, "decode", cpu_flags() if flags is None else flags)
    return Resolved(dtype, "as asked")
