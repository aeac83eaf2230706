"""Keep freed memory in the process for reuse, instead of handing it back to the OS (glibc).

PyTorch's CPU tensors come from ``malloc``. glibc serves a block above its mmap threshold
(128 KiB at first) with a fresh ``mmap`` and returns it with ``munmap`` when freed; that
threshold then rises to the size freed and the trim threshold to twice it, and whenever more
than the trim threshold lies free at the top of the heap, glibc hands it back to the OS. A
decoding step or a training update allocates and frees several large tensors at once, every
time (a beam step's logits and log-probabilities: 160 rows x 8,000 words x 4 bytes = 5 MB
each), so they keep coming back as new pages that the kernel must zero, one page fault per
4 KiB on first touch. On this project's Zen 4 machine, bf16 beam search over 256 lines took
165,000 page faults in two passes; with the settings below 2,500, and decoded 1.1-1.2x faster
(benchmarks/README.md, "Page faults").

:func:`keep_freed_memory` sets two ``mallopt`` parameters: blocks below 32 MiB (glibc's largest
mmap threshold) come from the heap, and up to 256 MiB of free heap stays mapped for reuse.
The cost is memory: the process keeps what it freed, up to its peak use, as PyTorch's CUDA
caching allocator does on a GPU. jemalloc or tcmalloc (``LD_PRELOAD``), which PyTorch's CPU
tuning guide recommends, do the same job with more machinery.
"""

from __future__ import annotations

import ctypes
import platform

M_TRIM_THRESHOLD = -1  # mallopt parameter numbers, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit glibc
TRIM_THRESHOLD = 256 << 20


def uses_glibc() -> bool:
    """True in a process linked against glibc (Linux, not musl)."""
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def keep_freed_memory() -> bool:
    """Serve blocks below 32 MiB from the heap and keep up to 256 MiB of freed heap mapped
    (glibc ``mallopt``); returns whether the settings applied (False on other C libraries,
    where nothing changes). Calling it again changes nothing further."""
    if not uses_glibc():
        return False
    libc = ctypes.CDLL(None)
    mmap_ok = libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    trim_ok = libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    return bool(mmap_ok and trim_ok)
