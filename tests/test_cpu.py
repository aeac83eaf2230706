"""The CPU's bf16 hardware and what ``auto`` makes of it: pure functions of made-up flag sets."""

from __future__ import annotations

import pytest

from mtkit import cpu
from mtkit.cpu import Verdict, bf16_hardware, choose_bf16, parse_cpuinfo, resolve_cpu_precision

AVX2 = frozenset({"sse4_2", "avx", "avx2", "fma"})  # AMD EPYC Zen 2/3, older Xeons
AVX512_BF16 = AVX2 | {"avx512f", "avx512bw", "avx512_bf16"}  # AMD Zen 4, Cooper Lake
AMX = AVX512_BF16 | {"amx_tile", "amx_bf16", "amx_int8"}  # Sapphire Rapids and later
GOOD, BAD = Verdict(True, "equal BLEU"), Verdict(False, "-2 BLEU")


@pytest.mark.parametrize(
    "flags, expected", [(AVX2, None), (AVX512_BF16, "avx512_bf16"), (AMX, "amx_bf16")]
)
def test_bf16_hardware(flags: frozenset[str], expected: str | None) -> None:
    assert bf16_hardware(flags) == expected


@pytest.mark.parametrize(
    "flags, ablation, bf16, words",
    [
        (AVX2, {"avx512_bf16": GOOD, "amx_bf16": GOOD}, False, "no bf16 hardware"),
        (AVX512_BF16, {"avx512_bf16": GOOD}, True, "matched fp32"),
        (AVX512_BF16, {"avx512_bf16": BAD}, False, "lost quality in the ablation (-2 BLEU)"),
        (AVX512_BF16, {"amx_bf16": GOOD}, False, "no train ablation"),
        (AMX, {"amx_bf16": GOOD, "avx512_bf16": BAD}, True, "amx_bf16 present"),
        (AMX, {"avx512_bf16": GOOD}, False, "no train ablation"),
        (frozenset(), {"avx512_bf16": GOOD}, False, "no bf16 hardware"),
    ],
)
def test_auto_chooses_bf16_only_on_hardware_whose_ablation_passed(
    flags: frozenset[str], ablation: dict, bf16: bool, words: str
) -> None:
    choice = choose_bf16(flags, "train", ablation)
    assert choice.bf16 is bf16 and choice.name == ("bf16" if bf16 else "fp32")
    assert words in choice.reason


@pytest.mark.parametrize("use", cpu.USES)
def test_the_shipped_ablation_never_picks_bf16_without_hardware(use: str) -> None:
    assert not choose_bf16(AVX2, use).bf16
    for hardware, verdict in cpu.ABLATION[use].items():
        assert hardware in cpu.BF16_FLAGS and verdict.finding
        flags = AVX2 | {hardware}
        assert choose_bf16(flags, use).bf16 is verdict.bf16_ok


def test_explicit_bf16_warns_only_without_hardware() -> None:
    slow = resolve_cpu_precision("bf16", "train", AVX2)
    assert slow.name == "bf16" and "emulated" in slow.warning and "\n" not in slow.warning
    for flags in (AVX512_BF16, AMX):
        assert resolve_cpu_precision("bf16", "decode", flags).warning == ""
    assert resolve_cpu_precision("fp32", "train", AVX2) == ("fp32", "as asked", "", "")
    auto = resolve_cpu_precision("auto", "decode", AVX2)
    assert auto.name == "fp32" and auto.reason.startswith("auto: ") and not auto.warning


def test_parse_cpuinfo_and_describe() -> None:
    text = (
        "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
        "flags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n\n"
        "processor\t: 1\nmodel name\t: other\nflags\t\t: fpu\n"
    )
    model, flags = parse_cpuinfo(text)
    assert model == "Intel(R) Xeon(R) Platinum 8480+" and bf16_hardware(flags) == "amx_bf16"
    line = cpu.describe(AVX2, "AMD EPYC 7B13")
    assert line == "AMD EPYC 7B13: avx2+ avx512f- avx512_bf16- amx_bf16- amx_int8-"
    assert parse_cpuinfo("") == ("", frozenset())


def test_this_machine_is_read() -> None:
    model, flags = cpu.cpu_info()
    assert model and cpu.describe().startswith(model)
    assert choose_bf16(flags, "train").reason  # whatever it is, it says why
