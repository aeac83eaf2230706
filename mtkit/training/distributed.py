"""Where this process trains: device, precision, and the torch.distributed group under torchrun.

``torchrun --nproc_per_node N -m mtkit train ...`` sets RANK, WORLD_SIZE and LOCAL_RANK; with
WORLD_SIZE > 1 every process joins one group (NCCL on CUDA, gloo on CPU) and wraps the model in
DistributedDataParallel. Rank 0 alone validates and writes files; the others wait at a barrier.
"""

from __future__ import annotations

import gc
import inspect
import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NamedTuple

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from mtkit.cpu import cpu_flags, resolve_cpu_precision
from mtkit.devices import steady_attention, torch_device
from mtkit.errors import MtkitError

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
# rank 0 validates (decoding a whole validation set) while the others wait at a barrier
BARRIER_TIMEOUT = timedelta(hours=2)


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1


def env_dist() -> Dist:
    """The process's place in a torchrun job (rank 0 of 1 outside torchrun)."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        raise MtkitError(
            "RANK, WORLD_SIZE and LOCAL_RANK must be integers (set by torchrun)"
        ) from None
    return Dist(rank, world, local)


def resolve_device(name: str, where: Dist) -> torch.device:
    """auto: CUDA when available, else CPU; under torchrun on CUDA, GPU LOCAL_RANK."""
    device = torch_device(name, "device")
    if device.type == "cuda":
        if where.active:
            device = torch_device(f"cuda:{where.local_rank}", "device (LOCAL_RANK)")
        torch.cuda.set_device(device)
    steady_attention(device)
    return device


class Precision(NamedTuple):
    """The autocast dtype (None: fp32), why it was chosen, and a warning to print (or "")."""

    dtype: torch.dtype | None
    reason: str
    warning: str = ""

    @property
    def name(self) -> str:
        return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[self.dtype]


def resolve_precision(
    precision: str, device: torch.device, flags: frozenset[str] | None = None
) -> Precision:
    """The autocast dtype for ``precision`` on ``device``. On CUDA, auto is bf16 where supported,
    else fp16. On CPU, auto asks :func:`mtkit.cpu.choose_bf16` (the CPU's ``flags``: bf16
    hardware and the ablation); an explicit bf16 runs everywhere, with a warning where the CPU
    has no bf16 hardware; fp16 is CUDA only."""
    if precision not in PRECISIONS:
        raise MtkitError(f"unknown precision '{precision}' (known: {', '.join(PRECISIONS)})")
    if device.type == "cpu":
        return _cpu_precision(precision, cpu_flags() if flags is None else flags)
    if precision == "auto":
        bf16 = torch.cuda.is_bf16_supported()
        return Precision(
            torch.bfloat16 if bf16 else torch.float16,
            f"auto: this GPU {'supports' if bf16 else 'lacks'} bf16",
        )
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    return Precision(dtype, "as asked")


def _cpu_precision(precision: str, flags: frozenset[str]) -> Precision:
    if precision == "fp16":
        raise MtkitError("precision fp16 needs a CUDA device; use bf16 or fp32 on CPU")
    name, reason, warning, _ = resolve_cpu_precision(precision, "train", flags)
    return Precision(torch.bfloat16 if name == "bf16" else None, reason, warning)


def autocast(device: torch.device, dtype: torch.dtype | None) -> AbstractContextManager:
    """Mixed precision (CUDA fp16/bf16, CPU bf16); nothing (fp32) when ``dtype`` is None."""
    if dtype is None:
        return nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def init_group(where: Dist, device: torch.device) -> None:
    if where.active and not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, timeout=BARRIER_TIMEOUT)


def close_group(where: Dist) -> None:
    """End the process group, once the DDP model around it is gone (the caller drops it first).

    DDP's reducer keeps the group alive, and a reducer freed after the group was destroyed is
    its last owner: the group's destructor then joins gloo's worker threads with the GIL held,
    while a worker that frees a finished collective's tensors waits for the GIL (a hang after
    the last update, seen once in CI). Freed before, the reducer leaves the group to
    ``destroy_process_group``, whose destructor runs without the GIL."""
    if where.active and dist.is_initialized():
        gc.collect()  # a DDP model held only by a reference cycle
        dist.destroy_process_group()


def wrap_model(model: nn.Module, where: Dist, device: torch.device) -> nn.Module:
    """DDP around the model when several processes train (buffers are constant: no broadcast)."""
    if not where.active:
        return model
    ids = [device.index] if device.type == "cuda" else None
    newer = "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
    no_sync = {"forward_sync_buffers" if newer else "broadcast_buffers": False}
    return DistributedDataParallel(model, device_ids=ids, **no_sync)


def all_reduce_sum(values: torch.Tensor, where: Dist) -> torch.Tensor:
    if where.active:
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values


def broadcast_flag(flag: bool, where: Dist, device: torch.device) -> bool:
    """Rank 0's decision, on every rank."""
    if not where.active:
        return flag
    value = torch.tensor([int(flag)], device=device)
    dist.broadcast(value, src=0)
    return bool(value.item())


def gather_objects(obj: Any, where: Dist) -> list[Any]:
    """Every rank's ``obj``, in rank order (a one-element list outside torchrun)."""
    if not where.active:
        return [obj]
    out: list[Any] = [None] * where.world_size
    dist.all_gather_object(out, obj)
    return out


def barrier(where: Dist) -> None:
    if where.active:
        dist.barrier()
