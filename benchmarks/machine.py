"""The machine a benchmark ran on, printed at the top of its output: CPU model, the flags that
decide bf16 and int8 speed (avx2, avx512f, avx512_bf16, amx_bf16, amx_int8), cores, torch, load.

Read through :mod:`mtkit.cpu`, the module training and decoding ask, so a table says which kind
of machine produced it (an AVX2-only EPYC, a Zen 4 with AVX512-BF16, a Xeon with AMX).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mtkit import cpu  # noqa: E402


def machine_lines() -> list[str]:
    """Two lines: the CPU and its flags; cores, torch version and the load average now."""
    import torch

    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    auto = cpu.choose_bf16(cpu.cpu_flags(), "train")
    return [
        f"cpu: {cpu.describe()}",
        f"     {os.cpu_count()} CPUs, torch {torch.__version__}, load average {load}; "
        f"train auto -> {auto.name} ({auto.reason})",
    ]


def print_machine() -> None:
    print("\n".join(machine_lines()), flush=True)


if __name__ == "__main__":
    print_machine()
