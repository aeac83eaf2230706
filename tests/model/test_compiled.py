"""The compiled decoding step (``--compile``): the eager engine's output, by one graph a step,
built by AOTInductor into a library.

Each compiled model is searched over batches with padding and without, of one sentence and
several, beam and greedy, and must give the eager model's hypotheses. AOTInductor compiles for
half a minute on CI's CPUs, so it compiles one architecture, the demo's (pre-norm, rotary) with
one layer a side, in fp32 and int8, into this module's own cache; the other variants, two-layer
models and ensembles are exported into the same graphs, which torch runs: tests/model/
test_traced.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from model_helpers import (
    AOT,
    BEAM,
    CPU,
    GREEDY,
    SOURCES,
    assert_search_equals_eager,
    batch,
    hypotheses,
    tiny,
)
from torch import nn

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.errors import MtkitError
from mtkit.model.compiled import check_compilable, compile_step
from mtkit.model.inference import compiles, prepare_for_inference
from mtkit.model.opaque import OpaqueLinear, opaque_layer
from mtkit.model.packed import replace_modules

pytestmark = pytest.mark.usefixtures("one_thread", "compiled_dir")


def test_compiled_fp32_search_equals_eager() -> None:
    """One library for every step after the first: beam and greedy, one sentence and several,
    padded and not."""
    eager = prepare_for_inference(tiny(**AOT), CPU)
    compiled = prepare_for_inference(tiny(**AOT), CPU, compile=True)
    assert_search_equals_eager(eager, compiled, (BEAM, GREEDY))


def test_an_encoder_library_encodes_as_eagerly_once_prepared() -> None:
    """A scheduling engine's encoder graph (``prepare_encoder``): the eager memory at every
    width (1 piece, past the attention's written-out queries, padded and not), the mask None
    where nothing is padded; searches through it and the step's library equal eager ones."""
    eager = prepare_for_inference(tiny(**AOT), CPU)
    compiled = prepare_for_inference(tiny(**AOT), CPU, compile=True)
    calls = []
    compiled.decode_step.prepare_encoder()
    graph = compiled.decode_step.encoder
    compiled.decode_step.encoder = lambda *args: calls.append(1) or graph(*args)
    with torch.inference_mode():
        for src in (batch([1], 23), batch([30], 23), batch([6, 6], 23), SOURCES[0]):
            want, got = eager.encode(src), compiled.encode(src)
            torch.testing.assert_close(got.memory, want.memory, atol=1e-5, rtol=1e-5)
            assert (got.src_keep is None) == (want.src_keep is None)
            assert got.src_keep is None or torch.equal(got.src_keep, want.src_keep)
    assert len(calls) == 4
    assert_search_equals_eager(eager, compiled, (BEAM,))
    assert len(calls) > 4


def perturbed(model: nn.Module, seed: int = 5) -> nn.Module:
    """``model`` with other weights (the same architecture)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return model


def test_a_later_run_loads_the_library_and_reads_its_own_weights(compiled_dir: Path) -> None:
    """The library is keyed by architecture, not weights: another checkpoint of the same
    architecture loads it without compiling and decodes with its own weights."""
    first = compile_step(prepare_for_inference(tiny(**AOT), CPU), CPU)
    built = {p: p.stat().st_mtime_ns for p in compiled_dir.glob("*.pt2")}
    assert first.decode_step.path in built
    other = compile_step(prepare_for_inference(perturbed(tiny(**AOT)), CPU), CPU)
    assert other.decode_step.path == first.decode_step.path
    assert {p: p.stat().st_mtime_ns for p in compiled_dir.glob("*.pt2")} == built  # loaded
    eager = prepare_for_inference(perturbed(tiny(**AOT)), CPU)
    assert hypotheses([eager], BEAM) != hypotheses([first], BEAM)  # the weights matter
    assert_search_equals_eager(eager, other)


def test_the_key_changes_with_the_architecture_the_kinds_and_torch(monkeypatch) -> None:
    from mtkit.model import compiled

    def key(model: nn.Module, quantize: str = "") -> str:
        model = prepare_for_inference(model, CPU, quantize=quantize)
        replace_modules(model, opaque_layer)
        linears = [m for m in model.modules() if isinstance(m, OpaqueLinear)]
        return compiled._key(model, linears)

    modern = key(tiny(**AOT))
    assert key(perturbed(tiny(**AOT))) == modern
    assert key(tiny(**AOT, kv_heads=2)) != modern
    assert key(tiny(pre_norm=True)) != modern
    assert key(tiny(**AOT), quantize="int8") != modern
    monkeypatch.setattr(torch, "__version__", "0.0.0")
    assert key(tiny(**AOT)) != modern


def test_a_broken_library_is_refused_in_one_line(compiled_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("MTKIT_COMPILED_DIR", str(compiled_dir / "broken"))
    path = compile_step(
        prepare_for_inference(tiny(**AOT), CPU), CPU, build="export"
    ).decode_step.path
    model = prepare_for_inference(tiny(**AOT), CPU)
    path.parent.mkdir(exist_ok=True)  # (made already where this process built the C++ kernel)
    path.write_bytes(b"not a zip")
    with pytest.raises(MtkitError, match=f"{path}: not a loadable compiled step.*delete it"):
        compile_step(model, CPU)


def test_an_unwritable_folder_or_a_failing_compiler_is_refused_in_one_line(
    compiled_dir: Path, monkeypatch
) -> None:
    file = compiled_dir / "a file"
    file.write_text("")
    monkeypatch.setenv("MTKIT_COMPILED_DIR", str(file / "compiled"))
    with pytest.raises(MtkitError, match=f"cannot keep compiled steps in {file}.*MTKIT_COMP"):
        compile_step(prepare_for_inference(tiny(**AOT), CPU), CPU)

    def fails(*_, **__):
        raise RuntimeError("C++ compile error\nmany lines")

    monkeypatch.setenv("MTKIT_COMPILED_DIR", str(compiled_dir / "failing"))
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", fails)
    with pytest.raises(MtkitError, match=r"failed \(C\+\+ compile error\); translate without"):
        compile_step(prepare_for_inference(tiny(**AOT), CPU), CPU)
    assert not list((compiled_dir / "failing").iterdir())  # nothing half-written


def test_compiled_ensemble_of_one_architecture_shares_its_library() -> None:
    """Two checkpoints of one architecture: one library, loaded twice, each with its weights."""
    eager = [prepare_for_inference(m, CPU) for m in (tiny(**AOT), perturbed(tiny(**AOT)))]
    models = [
        prepare_for_inference(m, CPU, compile=True) for m in (tiny(**AOT), perturbed(tiny(**AOT)))
    ]
    assert models[0].decode_step.path == models[1].decode_step.path
    assert hypotheses(models, BEAM) == hypotheses(eager, BEAM)


def steps(model: nn.Module, src: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Logits of each step of feeding ``tokens`` (B, T) with the cache, (B, T, V)."""
    with torch.inference_mode():
        state = model.start_state(model.encode(src), max_len=tokens.shape[1])
        return torch.stack(
            [model.decode_step(tokens[:, t], state) for t in range(tokens.shape[1])], 1
        )


def test_compiled_int8_is_as_close_to_fp32_as_eager_int8() -> None:
    """The int8 layers run the same fbgemm kernels; only the float code between them is
    inductor's, so the compiled step is as far from fp32 as the eager int8 step is."""
    src, tokens = batch([7, 4, 5], 23), batch([6, 6, 6], 29, seed=2)
    fp32 = steps(prepare_for_inference(tiny(**AOT), CPU), src, tokens)
    eager = steps(prepare_for_inference(tiny(**AOT), CPU, quantize="int8"), src, tokens)
    compiled = steps(
        prepare_for_inference(tiny(**AOT), CPU, quantize="int8", compile=True), src, tokens
    )
    error = (eager - fp32).abs().max()
    assert 0 < error < 0.5
    assert (compiled - fp32).abs().max() <= 2 * error
    assert (compiled - eager).abs().max() <= 2 * error


def test_refusals_name_what_is_not_compiled() -> None:
    with pytest.raises(MtkitError, match="decoder_self_attention 'average'"):
        check_compilable(tiny(decoder_self_attention="average"), CPU)
    with pytest.raises(MtkitError, match="does not run on cuda"):
        check_compilable(tiny(), torch.device("cuda"))
    with pytest.raises(MtkitError, match="--compile compiles mtkit's own engine"):
        TranslateConfig(compile=True, engine="ctranslate2")
    with pytest.raises(MtkitError, match="--compile cannot be combined with --shortlist"):
        TranslateConfig(compile=True, shortlist="x.tsv")
    with pytest.raises(MtkitError, match="--compile cannot be combined with --draft-shortlist"):
        TranslateConfig(SearchConfig(beam=1), compile=True, draft="d.pt", draft_shortlist="x")
    assert TranslateConfig(SearchConfig(beam=1), compile=True, draft="d.pt").draft == "d.pt"


def test_auto_compiles_where_it_can_and_on_refuses_elsewhere() -> None:
    """``--compile auto``: compiled on a CPU with a key/value cache, eager elsewhere, never
    refused; ``on`` leaves the refusal to compile_step; a bool from Python is on/off."""
    modern, average = tiny(**AOT), tiny(decoder_self_attention="average")
    cuda = torch.device("cuda")
    assert compiles("auto", modern, CPU) and compiles("on", average, CPU)
    assert not any(
        [
            compiles("auto", average, CPU),
            compiles("auto", modern, cuda),
            compiles("off", modern, CPU),
        ]
    )
    assert TranslateConfig(compile=True).compile == "on"
    assert TranslateConfig(compile=False).compile == "off"
    for other in (dict(engine="ctranslate2"), dict(shortlist="x.tsv")):
        assert TranslateConfig(compile="auto", **other).compile == "auto"
    with pytest.raises(MtkitError, match="--compile must be one of off, on, auto"):
        TranslateConfig(compile="sometimes")


def test_libraries_are_kept_in_the_user_cache_unless_told(monkeypatch, tmp_path):
    from mtkit.model.compiled import cache_dir

    monkeypatch.delenv("MTKIT_COMPILED_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "mtkit" / "compiled"
    monkeypatch.setenv("MTKIT_COMPILED_DIR", str(tmp_path / "elsewhere"))
    assert cache_dir() == tmp_path / "elsewhere"
