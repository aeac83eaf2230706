"""The compiled decoding step (``--compile``): the eager engine's output, by one graph a step.

Each compiled model is searched over batches with padding and without, of one sentence and
several, beam and greedy, and must give the eager model's hypotheses. Inductor compiles for
minutes on CI's CPUs, so it compiles one model, the demo's (pre-norm, rotary); the other
variants (the paper's model, relative positions and ALiBi, whose biases come from the step,
grouped-query keys/values) and ensembles are traced into the same graphs but run them eagerly
(``aot_eager``): what they test is the capture, the dynamic shapes and the state handling.
"""

from __future__ import annotations

import copy

import pytest
import torch
from test_transformer import batch, tiny
from torch import nn

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.decoding.search import generate
from mtkit.errors import MtkitError
from mtkit.model.compiled import OpaqueLinear, check_compilable, compile_step
from mtkit.model.inference import prepare_for_inference
from mtkit.model.packed import onednn_available

pytestmark = pytest.mark.usefixtures("one_thread")
CPU = torch.device("cpu")
VARIANTS = {
    "post_norm_sinusoidal": dict(share_layers=True, ffn_activation="swiglu"),
    "relative": dict(positions="relative", max_relative_position=3),
    "alibi": dict(positions="alibi", kv_heads=2),
}
MODERN = dict(pre_norm=True, positions="rope")
SOURCES = [batch([7, 4, 5, 9], 23), batch([6, 6], 23, seed=3), batch([3], 23, seed=4)]


def hypotheses(models: list[nn.Module], cfg: SearchConfig,
               sources: list[torch.Tensor] = SOURCES) -> list[list[tuple]]:  # fmt: skip
    found = []
    for src in sources:
        found += [[(tuple(h.tokens), round(h.score, 4)) for h in hyps]
                  for hyps in generate(models, src, cfg)]  # fmt: skip
    return found


BEAM, GREEDY = SearchConfig(beam=3, nbest=2, max_len_b=8), SearchConfig(beam=1, max_len_b=8)


def assert_search_equals_eager(eager: nn.Module, compiled: nn.Module,
                               configs: tuple[SearchConfig, ...] = (BEAM,)) -> None:  # fmt: skip
    calls = []
    graph = compiled.decode_step.graph
    compiled.decode_step.graph = lambda *args: calls.append(1) or graph(*args)
    for cfg in configs:
        assert hypotheses([compiled], cfg) == hypotheses([eager], cfg)
    assert len(calls) > 20  # the steps went through the graph, not the eager fallback


def test_compiled_fp32_search_equals_eager() -> None:
    """Inductor's graphs: the first step's, the later steps', a one-sentence batch's, greedy
    search's (one row per source)."""
    eager = prepare_for_inference(tiny(**MODERN), CPU)
    compiled = prepare_for_inference(tiny(**MODERN), CPU, compile=True)
    assert_search_equals_eager(eager, compiled, (BEAM, GREEDY))


@pytest.mark.parametrize("variant", VARIANTS)
def test_traced_variant_search_equals_eager(variant: str) -> None:
    eager = prepare_for_inference(tiny(**VARIANTS[variant]), CPU)
    traced = compile_step(prepare_for_inference(tiny(**VARIANTS[variant]), CPU), CPU,
                          backend="aot_eager")  # fmt: skip
    assert_search_equals_eager(eager, traced)


def test_traced_ensemble_equals_eager_ensemble() -> None:
    models = [tiny(), tiny(pre_norm=True)]
    eager = [prepare_for_inference(copy.deepcopy(m), CPU) for m in models]
    traced = [compile_step(prepare_for_inference(m, CPU), CPU, backend="aot_eager")
              for m in models]  # fmt: skip
    cfg = SearchConfig(beam=2, max_len_b=6)
    assert hypotheses(traced, cfg, SOURCES[:1]) == hypotheses(eager, cfg, SOURCES[:1])


def steps(model: nn.Module, src: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Logits of each step of feeding ``tokens`` (B, T) with the cache, (B, T, V)."""
    with torch.inference_mode():
        state = model.start_state(model.encode(src), max_len=tokens.shape[1])
        return torch.stack([model.decode_step(tokens[:, t], state)
                            for t in range(tokens.shape[1])], 1)  # fmt: skip


def test_compiled_int8_is_as_close_to_fp32_as_eager_int8() -> None:
    """The int8 layers run the same fbgemm kernels; only the float code between them is
    inductor's, so the compiled step is as far from fp32 as the eager int8 step is."""
    src, tokens = batch([7, 4, 5], 23), batch([6, 6, 6], 29, seed=2)
    fp32 = steps(prepare_for_inference(tiny(**MODERN), CPU), src, tokens)
    eager = steps(prepare_for_inference(tiny(**MODERN), CPU, quantize="int8"), src, tokens)
    compiled = steps(prepare_for_inference(tiny(**MODERN), CPU, quantize="int8", compile=True),
                     src, tokens)  # fmt: skip
    error = (eager - fp32).abs().max()
    assert 0 < error < 0.5
    assert (compiled - fp32).abs().max() <= 2 * error
    assert (compiled - eager).abs().max() <= 2 * error


@pytest.mark.parametrize("kind", ["int8", "fp32", "bf16"])
def test_opaque_linear_is_the_layer_it_replaces(kind: str) -> None:
    """Called eagerly, the custom operator returns exactly what the prepared layer returns."""
    if kind != "int8" and not onednn_available(torch.float32 if kind == "fp32" else
                                               torch.bfloat16):  # fmt: skip
        pytest.skip(f"no oneDNN {kind} kernels in this build")
    dtype, quantize = ("fp32", "int8") if kind == "int8" else (kind, "")
    model = prepare_for_inference(tiny(), CPU, dtype, quantize)
    layer = model.decoder[0].ffn
    x = torch.randn(5, 3, 32)
    with torch.inference_mode():
        before = layer(x)
        compile_step(model, CPU)
        assert all(isinstance(m, OpaqueLinear) for m in (layer.fc1, layer.fc2)), layer
        assert torch.equal(layer(x), before)


def test_alignment_steps_run_eagerly_with_the_same_result() -> None:
    src, tokens = batch([7, 4], 23), batch([5, 5], 29, seed=2)
    eager = tiny()
    compiled = compile_step(prepare_for_inference(tiny(), CPU), CPU, backend="aot_eager")
    with torch.inference_mode():
        states = [m.start_state(m.encode(src), max_len=5, alignment_layer=1)
                  for m in (eager, compiled)]  # fmt: skip
        for t in range(tokens.shape[1]):
            a, b = (m.decode_step(tokens[:, t], s)
                    for m, s in zip((eager, compiled), states, strict=True))  # fmt: skip
            torch.testing.assert_close(a, b)
        torch.testing.assert_close(states[0].attended(1), states[1].attended(1))


def test_refusals_name_what_is_not_compiled() -> None:
    with pytest.raises(MtkitError, match="decoder_self_attention 'average'"):
        check_compilable(tiny(decoder_self_attention="average"), CPU)
    with pytest.raises(MtkitError, match="does not run on cuda"):
        check_compilable(tiny(), torch.device("cuda"))
    with pytest.raises(MtkitError, match="--compile compiles mtkit's own engine"):
        TranslateConfig(compile=True, engine="ctranslate2")
    with pytest.raises(MtkitError, match="--compile cannot be combined with --draft"):
        TranslateConfig(compile=True, shortlist="x.tsv")


def test_graphs_are_kept_in_the_user_cache_unless_inductor_is_told(monkeypatch, tmp_path):
    from mtkit.model.compiled import cache_dir

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "mtkit" / "inductor"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert cache_dir() == tmp_path / "elsewhere"
