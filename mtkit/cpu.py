"""What this CPU offers for bf16, read once from its flags, and what ``auto`` makes of it.

Training (``--precision``), decoding (``--dtype``) and the benchmarks all ask here. The choice
is a pure function of the CPU's flags (:func:`choose_bf16`), so it is tested with made-up flag
sets; :func:`cpu_flags` reads the real ones from ``/proc/cpuinfo`` (Linux), or from PyTorch's
own probes elsewhere.

bf16 hardware means instructions that multiply bf16 and accumulate in fp32: AMX tiles
(``amx_bf16``: Intel Sapphire Rapids and later) or AVX-512 dot products (``avx512_bf16``:
Intel Cooper Lake and later, AMD Zen 4 and later). Without them PyTorch still computes in bf16,
converting in software: it runs, but slower than fp32.

``auto`` picks bf16 only on bf16 hardware, and only where the ablation in benchmarks/README.md
("bf16 ablation") found no quality loss: the ``make demo`` run (a 480 s training budget) in
fp32 and in bf16 on one machine, BLEU compared on test_2016_flickr. :data:`ABLATION` holds what
that found, per kind of bf16 hardware.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

CPUINFO = Path("/proc/cpuinfo")
# the flags the benchmarks print, in this order
REPORTED = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8")
# bf16 hardware, fastest first
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


class Verdict(NamedTuple):
    """What the ablation found for one kind of bf16 hardware."""

    bf16_ok: bool  # bf16 reached fp32's BLEU (within noise) in the same budget
    finding: str  # the numbers, in a few words


USES = ("train", "decode")
# per use and bf16 hardware, from benchmarks/README.md ("bf16 ablation"); unmeasured: absent.
# Training on AMD Zen 4 (avx512_bf16, no AMX), the demo's configuration (transformer-small-
# modern, 2 threads, 480 s) on an otherwise idle machine, fp32 then bf16: bf16 autocast ran at
# 1.40x fp32's tokens/s and made 810 updates to 578, BLEU 32.9 vs 31.6 (chrF 58.0 vs 55.2); at
# update 570 of both runs it scored 30.4 vs 31.1 (chrF 55.1 vs 55.0), within the 1.0 BLEU spread
# of 3 seeds. An earlier pair on a machine loaded 4-7 (52 vs 87 updates) had lost: bf16's many small
# cast kernels stall when the cores are taken.
# Decoding the fp32 model of the first run (beam 5): bf16 linear layers gave the same BLEU and
# 69% of the outputs identical to fp32's (an undertrained model, whose looping outputs are
# full of near ties), 1.24-1.30x faster at 1 thread.
# Training on Intel Xeon with AMX (amx_bf16), the same configuration, two seeds, fp32 then bf16
# (benchmarks/results/demo-ab-amx.jsonl): 963 and 769 updates to 638 and 624 (1.50x and 1.23x
# the tokens/s), BLEU 35.1 vs 31.6 and 33.7 vs 30.8; at fp32's update count 31.5 vs 31.6 and
# 31.0 vs 30.8. Decoding the seed-1 fp32 model in bf16: BLEU 31.7 vs 31.6, 924 of 1,000
# outputs identical, 1.1-1.3x fp32's speed (mtkit translate, beam 5, 1 and 2 threads).
ABLATION: dict[str, dict[str, Verdict]] = {
    "train": {
        "amx_bf16": Verdict(
            True,
            "make demo, 480 s, 2 threads, two seeds: BLEU 35.1 vs fp32 31.6 and 33.7 vs 30.8, "
            "1.51x and 1.23x the updates; 31.5 vs 31.6 and 31.0 vs 30.8 at equal updates",
        ),
        "avx512_bf16": Verdict(
            True,
            "make demo, 480 s, 2 threads, idle machine: BLEU 32.9 vs fp32 31.6, 1.40x the "
            "updates; 30.4 vs 31.1 at equal updates, within the seed spread",
        ),
    },
    "decode": {
        "amx_bf16": Verdict(
            True,
            "BLEU 31.7 vs fp32 31.6 on test_2016_flickr, 924/1,000 outputs identical, "
            "1.1-1.3x fp32's speed",
        ),
        "avx512_bf16": Verdict(
            True,
            "BLEU 2.8 = 2.8, chrF 20.5 vs 20.6 on test_2016_flickr, "
            "1.24-1.30x fp32's tokens/s at 1 thread",
        ),
    },
}


class Choice(NamedTuple):
    """``auto``'s decision: bf16 or not, and why, in words fit for a log line."""

    bf16: bool
    reason: str

    @property
    def name(self) -> str:
        return "bf16" if self.bf16 else "fp32"


def bf16_hardware(flags: Iterable[str]) -> str | None:
    """The fastest bf16 hardware among ``flags`` (``amx_bf16``, ``avx512_bf16``), or None.

    >>> bf16_hardware({"avx2", "avx512f", "avx512_bf16"}), bf16_hardware({"avx2"})
    ('avx512_bf16', None)
    """
    have = set(flags)
    return next((flag for flag in BF16_FLAGS if flag in have), None)


def choose_bf16(
    flags: Iterable[str], use: str = "train", ablation: dict[str, Verdict] | None = None
) -> Choice:
    """``auto`` for ``use`` (train or decode) on a CPU with ``flags``: bf16 where it has bf16
    hardware whose ablation (``ABLATION[use]`` unless given) showed no quality loss, else fp32;
    with the reason."""
    ablation = ABLATION[use] if ablation is None else ablation
    hardware = bf16_hardware(flags)
    if hardware is None:
        return Choice(False, "this CPU has no bf16 hardware (neither amx_bf16 nor avx512_bf16)")
    verdict = ablation.get(hardware)
    if verdict is None:
        return Choice(False, f"{hardware} present, but no {use} ablation on such a CPU yet")
    if not verdict.bf16_ok:
        return Choice(
            False, f"{hardware} present, but bf16 lost quality in the ablation ({verdict.finding})"
        )
    return Choice(
        True, f"{hardware} present and bf16 matched fp32 in the ablation ({verdict.finding})"
    )


def emulation_warning(flags: Iterable[str]) -> str | None:
    """The one-line warning for an explicit bf16 request on a CPU without bf16 hardware."""
    if bf16_hardware(flags) is not None:
        return None
    return (
        "bf16 on a CPU without bf16 hardware (no avx512_bf16 or amx_bf16): emulated in "
        "software, slower than fp32"
    )


class Resolved(NamedTuple):
    """A precision asked for on this CPU, resolved: its name, why, a warning (or ""), and the
    quantization it brings (``--dtype fast``: int8 where bf16 is not chosen)."""

    name: str  # fp32 | bf16
    reason: str
    warning: str = ""
    quantize: str = ""  # "" | int8


def resolve_cpu_precision(requested: str, use: str, flags: Iterable[str]) -> Resolved:
    """``auto``, ``fp32`` or ``bf16`` for ``use`` (train or decode) on a CPU with ``flags``.

    >>> resolve_cpu_precision("bf16", "train", {"avx2"}).warning[:28]
    'bf16 on a CPU without bf16 h'
    """
    flags = frozenset(flags)
    if requested == "auto":
        choice = choose_bf16(flags, use)
        return Resolved(choice.name, f"auto: {choice.reason}")
    if requested == "bf16":
        return Resolved("bf16", "as asked", emulation_warning(flags) or "")
    return Resolved(requested, "as asked")


def parse_cpuinfo(text: str) -> tuple[str, frozenset[str]]:
    """(model name, flags) of the first processor in a ``/proc/cpuinfo`` text.

    >>> model, flags = parse_cpuinfo("model name\\t: AMD EPYC\\nflags\\t\\t: fpu avx2\\n")
    >>> model, sorted(flags)
    ('AMD EPYC', ['avx2', 'fpu'])
    """
    model, flags = "", frozenset[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = frozenset(value.split())
    return model, flags


def _torch_flags() -> frozenset[str]:
    """The flags PyTorch's own probes can tell (``torch.cpu``), where /proc/cpuinfo cannot be
    read (not Linux)."""
    import torch

    probes = {
        "avx2": "_is_avx2_supported",
        "avx512f": "_is_avx512_supported",
        "avx512_bf16": "_is_avx512_bf16_supported",
        "amx_bf16": "_is_amx_tile_supported",
    }
    return frozenset(
        flag for flag, probe in probes.items() if getattr(torch.cpu, probe, lambda: False)()
    )


@functools.cache
def cpu_info() -> tuple[str, frozenset[str]]:
    """(model name, flags) of this machine's CPU, read once."""
    try:
        model, flags = parse_cpuinfo(CPUINFO.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        model, flags = "", frozenset()
    if not flags:
        import platform

        model, flags = model or platform.processor(), _torch_flags()
    return model or "unknown CPU", flags


def cpu_flags() -> frozenset[str]:
    return cpu_info()[1]


def describe(flags: Iterable[str] | None = None, model: str | None = None) -> str:
    """One line for benchmark headers: the CPU model and the flags in :data:`REPORTED`."""
    if flags is None or model is None:
        model, flags = model or cpu_info()[0], cpu_flags() if flags is None else flags
    have = set(flags)
    marks = " ".join(f"{flag}{'+' if flag in have else '-'}" for flag in REPORTED)
    return f"{model}: {marks}"
