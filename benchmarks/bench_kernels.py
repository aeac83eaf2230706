"""The kernels of one beam step, alone: linear layers and attention at decoding shapes.

How far each kernel is from the CPU's peak tells what a faster decoder could still gain. Rows
are those of 32 sentences x beam 5 (160) through transformer-small (d 256, ffn 1,024, 4 heads,
8,000-piece vocabulary), 1 thread by default:

- linear layers: torch's fp32 ``F.linear``, fp32 and bf16 packed for oneDNN
  (:class:`mtkit.model.packed.PackedLinear`, what ``mtkit translate`` runs) and torch's dynamic
  int8 (``--quantize int8``), with the bf16 GFLOP/s;
- attention: ``scaled_dot_product_attention`` with its default CPU kernel and forced to its
  math backend, beside a plain matmul-softmax-matmul as a reference, for a decoder
  self-attention step (1 query over t keys per row) and the beams' cross-attention (5 queries
  per sentence over its source).

    .venv/bin/python benchmarks/bench_kernels.py [--threads 1] [--rows 160]
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from machine import print_machine
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from mtkit.model.packed import PackedLinear


def microseconds(run: Callable[[], object], calls: int) -> float:
    """Best of 3 rounds of ``calls`` calls, per call, after 10 warm-up calls."""
    for _ in range(10):
        run()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def linear_times(rows: int, d_in: int, d_out: int, calls: int) -> list[float]:
    """Microseconds per call: torch fp32, fp32 packed, bf16 packed, dynamic int8."""
    from torch.ao.quantization import quantize_dynamic

    linear, x = nn.Linear(d_in, d_out), torch.randn(rows, d_in)
    fp32 = PackedLinear(linear.weight, linear.bias)
    bf16 = PackedLinear(linear.weight, linear.bias, torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization deprecation notices
        int8 = quantize_dynamic(nn.Sequential(linear), {nn.Linear}, dtype=torch.qint8)
    with torch.inference_mode():
        return [microseconds(lambda m=m: m(x), calls) for m in (linear, fp32, bf16, int8)]


def linear_rows(rows: int, calls: int) -> None:
    print(f"linear layers, {rows} rows: microseconds per call")
    print(
        f"{'in x out':>12} {'fp32':>8} {'fp32 packed':>12} {'bf16 packed':>12} {'int8':>8}"
        f" {'bf16 GFLOP/s':>13}"
    )
    for d_in, d_out in [(256, 8000), (256, 768), (256, 1024), (1024, 256), (256, 256)]:
        times = linear_times(rows, d_in, d_out, calls)
        gflops = 2 * rows * d_in * d_out / times[2] / 1e3
        print(
            f"{d_in:>5} x {d_out:<5} {times[0]:8.0f} {times[1]:12.0f} {times[2]:12.0f} "
            f"{times[3]:8.0f} {gflops:13.0f}"
        )


def attention_times(batch: int, queries: int, keys: int, masked: bool, calls: int) -> list[float]:
    """Microseconds per call: SDPA's default CPU kernel, its math backend, matmul reference."""
    q = torch.randn(batch, 4, queries, 64)
    k, v = torch.randn(batch, 4, keys, 64), torch.randn(batch, 4, keys, 64)
    mask = torch.ones(batch, 1, 1, keys, dtype=torch.bool) if masked else None

    def sdpa() -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def reference() -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-1, -2)) * 0.125
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return torch.matmul(scores.softmax(-1), v)

    default = microseconds(sdpa, calls)
    with sdpa_kernel(SDPBackend.MATH):
        math = microseconds(sdpa, calls)
    return [default, math, microseconds(reference, calls)]


def attention_rows(rows: int, calls: int, beam: int = 5) -> None:
    print(f"attention, {rows} rows x 4 heads x 64: microseconds per call")
    print(f"{'shape':>30} {'sdpa':>8} {'sdpa math':>10} {'matmul ref':>11}")
    shapes = [(rows, 1, t, False) for t in (10, 30)]  # self-attention steps
    shapes += [(rows // beam, beam, s, True) for s in (20, 30)]  # cross-attention, padded
    for batch, queries, keys, masked in shapes:
        default, math, plain = attention_times(batch, queries, keys, masked, calls)
        name = f"{batch} x {queries} queries x {keys} keys"
        print(f"{name:>30} {default:8.0f} {math:10.0f} {plain:11.0f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rows", type=int, default=160, help="sentences x beam")
    p.add_argument("--calls", type=int, default=100, help="calls per timed round")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print_machine()
    print(f"threads {args.threads}")
    linear_rows(args.rows, args.calls)
    attention_rows(args.rows, args.calls)


if __name__ == "__main__":
    main()
