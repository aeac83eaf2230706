"""The compiled decoding step (``--compile``): the eager engine's output, by one graph a step.

Each compiled model is searched over batches with padding and without, of one sentence and
several, beam and greedy, and must give the eager model's hypotheses. AOTInductor compiles for
half a minute on CI's CPUs, so it compiles one architecture, the demo's (pre-norm, rotary) with
one layer a side, in fp32 and int8, into this module's own cache; the other variants (relative
positions and ALiBi, whose biases come from the step, grouped-query keys/values, shared layers,
the paper's model), two-layer models and ensembles are exported into the same graph, which
torch runs (``build="export"``): what they test is the capture, the dynamic shapes and the
state handling.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from model_helpers import BEAM, GREEDY, MODERN, SOURCES, batch, hypotheses, tiny
from torch import nn
from variants import VARIANTS as ALL

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.decoding.search import generate
from mtkit.errors import MtkitError
from mtkit.model.attention import COMPILED_QUERIES
from mtkit.model.compiled import check_compilable, compile_step
from mtkit.model.inference import compiles, prepare_for_inference
from mtkit.model.opaque import OpaqueLinear, opaque_layer
from mtkit.model.packed import replace_modules

pytestmark = pytest.mark.usefixtures("one_thread", "compiled_dir")
CPU = torch.device("cpu")
# the variants exported here (tests/variants.py's): biases from the step (relative positions,
# ALiBi), one or two key/value heads, a gated feed-forward network, shared layers
VARIANTS = {name: ALL[name] for name in ("relative", "alibi_mqa_geglu", "relative_gqa_shared")}
# what AOTInductor compiles: the demo's architecture with one layer a side (a library builds in
# ~30 s on CI's CPUs instead of ~45 s with two); the traced tests capture two-layer models
AOT = dict(MODERN, layers=1)


@pytest.fixture(scope="module")
def compiled_dir(tmp_path_factory) -> Iterator[Path]:
    """This module's cache of compiled steps (the libraries built once, shared by its tests)."""
    path = tmp_path_factory.mktemp("compiled")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MTKIT_COMPILED_DIR", str(path))
        yield path


def assert_search_equals_eager(
    eager: nn.Module, compiled: nn.Module, configs: tuple[SearchConfig, ...] = (BEAM,)
) -> None:
    calls = []
    graph = compiled.decode_step.graph
    compiled.decode_step.graph = lambda *args: calls.append(1) or graph(*args)
    for cfg in configs:
        assert hypotheses([compiled], cfg) == hypotheses([eager], cfg)
    assert len(calls) > 20  # the steps went through the graph, not the eager fallback


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
    path.parent.mkdir()
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


def test_beams_wider_than_the_graph_run_eagerly() -> None:
    eager = prepare_for_inference(tiny(**MODERN), CPU)
    traced = compile_step(prepare_for_inference(tiny(**MODERN), CPU), CPU, build="export")
    graph, calls = traced.decode_step.graph, []
    traced.decode_step.graph = lambda *args: calls.append(1) or graph(*args)
    wide = SearchConfig(beam=COMPILED_QUERIES + 1, max_len_b=4)
    assert hypotheses([traced], wide, SOURCES[:1]) == hypotheses([eager], wide, SOURCES[:1])
    assert not calls


@pytest.mark.parametrize("variant", VARIANTS)
def test_traced_variant_search_equals_eager(variant: str) -> None:
    eager = prepare_for_inference(tiny(**VARIANTS[variant]), CPU)
    traced = compile_step(
        prepare_for_inference(tiny(**VARIANTS[variant]), CPU), CPU, build="export"
    )
    assert_search_equals_eager(eager, traced)


@pytest.mark.parametrize("variant", ["modern", *VARIANTS])
def test_traced_positions_at_once_equal_eager(variant: str) -> None:
    """Several positions at once (speculative decoding's check) through their own graph: the
    eager model's logits after a first step, after 3 positions, and after 4 more once the
    state was rolled back to 3; a graph built on first use."""
    config = MODERN if variant == "modern" else VARIANTS[variant]
    eager = prepare_for_inference(tiny(**config), CPU)
    traced = compile_step(prepare_for_inference(tiny(**config), CPU), CPU, build="export")
    src, tokens = batch([7, 4, 5], 23), batch([9, 9, 9], 29, seed=2)
    found = []
    with torch.inference_mode():
        for model in (eager, traced):
            state = model.start_state(model.encode(src), max_len=9)
            first = model.decode_steps(tokens[:, :1], state)
            three = model.decode_steps(tokens[:, 1:4], state)
            state.truncate(3)
            found.append((first, three, model.decode_steps(tokens[:, 3:7], state)))
    assert traced.decode_step.multi is not None
    for a, b in zip(*found, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_traced_ensemble_equals_eager_ensemble() -> None:
    models = [tiny(), tiny(pre_norm=True)]
    eager = [prepare_for_inference(copy.deepcopy(m), CPU) for m in models]
    traced = [compile_step(prepare_for_inference(m, CPU), CPU, build="export") for m in models]
    cfg = SearchConfig(beam=2, max_len_b=6)
    assert hypotheses(traced, cfg, SOURCES[:1]) == hypotheses(eager, cfg, SOURCES[:1])


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


def test_alignment_steps_run_eagerly_with_the_same_result() -> None:
    src, tokens = batch([7, 4], 23), batch([5, 5], 29, seed=2)
    eager = tiny()
    compiled = compile_step(prepare_for_inference(tiny(), CPU), CPU, build="export")
    with torch.inference_mode():
        states = [
            m.start_state(m.encode(src), max_len=5, alignment_layer=1) for m in (eager, compiled)
        ]
        for t in range(tokens.shape[1]):
            a, b = (
                m.decode_step(tokens[:, t], s)
                for m, s in zip((eager, compiled), states, strict=True)
            )
            torch.testing.assert_close(a, b)
        torch.testing.assert_close(states[0].attended(1), states[1].attended(1))


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


def test_speculative_decoding_through_compiled_steps_gives_greedy_output() -> None:
    """A compiled teacher checks a compiled draft's proposals (the draft's single positions
    through its graph, the check in one eager pass); the output is the teacher's greedy
    output, token for token, and steps went through the graphs. Teacher and draft share one
    architecture: one key. Exported graphs (the check's graph of several positions is built
    by AOTInductor as the step's is, above)."""
    from mtkit.decoding.speculative import Draft, DraftStats

    teacher = prepare_for_inference(tiny(**AOT), CPU)
    draft, noise = tiny(**AOT), torch.Generator().manual_seed(5)
    with torch.no_grad():  # a draft close to the teacher, not equal: some proposals fail
        for weight in draft.parameters():
            weight.add_(0.2 * torch.randn(weight.shape, generator=noise))
    draft = compile_step(prepare_for_inference(draft, CPU), CPU, build="export")
    compiled = compile_step(prepare_for_inference(tiny(**AOT), CPU), CPU, build="export")
    assert draft.decode_step.path == compiled.decode_step.path
    calls = []
    for model in (draft, compiled):
        graph = model.decode_step.graph
        model.decode_step.graph = lambda *args, graph=graph: calls.append(1) or graph(*args)
    stats = DraftStats()
    for src in SOURCES:
        greedy = generate([teacher], src, GREEDY)
        found = generate([compiled], src, GREEDY, draft=Draft(draft, 3, stats))
        assert [[h.tokens for h in hyps] for hyps in found] == [
            [h.tokens for h in hyps] for hyps in greedy
        ]
    assert len(calls) > 20 and 0 < stats.acceptance < 1
    assert compiled.decode_step.multi is not None  # the check: several positions, one graph


def test_libraries_are_kept_in_the_user_cache_unless_told(monkeypatch, tmp_path):
    from mtkit.model.compiled import cache_dir

    monkeypatch.delenv("MTKIT_COMPILED_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "mtkit" / "compiled"
    monkeypatch.setenv("MTKIT_COMPILED_DIR", str(tmp_path / "elsewhere"))
    assert cache_dir() == tmp_path / "elsewhere"
