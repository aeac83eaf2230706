"""Model FLOPs of Transformer training, and the matmul peak MFU divides them by.

Shared by bench_train.py (mtkit against JoeyNMT) and bench_train_mtkit.py (mtkit alone).
"""

from __future__ import annotations

import time

import numpy as np
import torch


def train_matmul_flops(
    src_len: np.ndarray,
    tgt_len: np.ndarray,
    d: int,
    f: int,
    v: int,
    encoder_layers: int,
    decoder_layers: int,
) -> float:
    """Training matmul FLOPs (3x forward) of sentence pairs with these piece counts.

    Per pair with S = source + EOS and T = BOS + target positions, d model width, f FFN width,
    V target vocabulary, forward multiply-adds x2 (Kaplan et al., 2020; causal attention counted
    in full, as the tools compute it): encoder layer S(8d^2 + 4df) + 4S^2 d; decoder layer
    T(12d^2 + 4df) + 4Sd^2 (memory keys and values) + 4T^2 d + 4TSd; output projection 2TdV.
    """
    s = np.asarray(src_len, dtype=np.float64) + 1
    t = np.asarray(tgt_len, dtype=np.float64) + 1
    enc = s * (8 * d * d + 4 * d * f) + 4 * s * s * d
    dec = t * (12 * d * d + 4 * d * f) + 4 * s * d * d + 4 * t * t * d + 4 * t * s * d
    forward = encoder_layers * enc.sum() + decoder_layers * dec.sum() + 2 * t.sum() * d * v
    return 3 * float(forward)


def matmul_peak(
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    size: int = 2048,
    repeats: int = 5,
) -> float:
    """Best FLOP/s of a square ``size`` matmul in ``dtype`` with torch's current threads (TF32
    left at torch's default), after two warm-up runs."""
    device = torch.device(device)
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    best = float("inf")
    calls = 10 if device.type == "cuda" else 1  # a GPU's product is shorter than a launch's gap
    for _ in range(repeats + 2):
        _sync(device)
        start = time.perf_counter()
        for _ in range(calls):
            torch.matmul(a, b)
        _sync(device)
        best = min(best, (time.perf_counter() - start) / calls)
    return 2 * size**3 / best


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
