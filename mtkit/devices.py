"""Device names, parsed in one place: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.

Training, mtkit's own decoding engine and the CTranslate2 engine all take the same ``--device``
values; :func:`parse_device` reads them, and each user checks availability with its own
library (torch or CTranslate2), since the two can differ on one machine; torch is imported
only by the function that needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from mtkit.errors import MtkitError

if TYPE_CHECKING:
    import torch

KNOWN = "auto, cpu, cuda or cuda:N"


class DeviceName(NamedTuple):
    kind: str  # auto | cpu | cuda
    index: int | None  # cuda:N -> N; None when not given


def parse_device(name: str, option: str = "--device") -> DeviceName:
    """Read a device name, refusing anything else with one line naming ``option``.

    >>> parse_device("cuda:1"), parse_device("cpu")
    (DeviceName(kind='cuda', index=1), DeviceName(kind='cpu', index=None))
    """
    kind, sep, index = name.strip().partition(":")
    if kind in ("auto", "cpu") and not sep:
        return DeviceName(kind, None)
    if kind == "cuda" and not sep:
        return DeviceName("cuda", None)
    if kind == "cuda" and index.isdigit():
        return DeviceName("cuda", int(index))
    raise MtkitError(f"{option}: unknown device {name!r} (use {KNOWN})")


def torch_device(name: str, option: str = "--device") -> torch.device:
    """The torch device for ``name``: ``auto`` is CUDA when torch sees a GPU, else CPU; a CUDA
    device this machine lacks is refused."""
    import torch  # here: the CTranslate2 engine parses device names without torch

    kind, index = parse_device(name, option)
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise MtkitError(f"{option} {name}: CUDA is not available on this machine")
    if (index or 0) >= torch.cuda.device_count():
        raise MtkitError(f"{option} {name}: device cuda:{index} does not exist")
    return torch.device("cuda", index or 0)


def steady_attention(device: torch.device) -> None:
    """On CUDA, keep ``scaled_dot_product_attention`` off cuDNN's backend in this process.

    cuDNN attention, chosen first for bf16 and fp16 on recent GPUs, builds an execution plan
    for every new shape (~10 ms of CPU each). Decoding meets a new key length at every step and
    training a new batch shape at most updates: on an H200 the first bf16 pass over 300
    sentences took 8.9 s against 1.2 s in fp32, 87% of it in those plans (0.46 s against
    0.45 s once every shape had one). Flash and memory-efficient attention serve any shape at
    once. Nothing changes on CPU."""
    if device.type == "cuda":
        import torch

        torch.backends.cuda.enable_cudnn_sdp(False)
