"""The compiled decoding step's graphs as exported (``build="export"``, run by torch without
AOTInductor's compiling, which tests/model/test_compiled.py does for one architecture): what
these test is the capture, the dynamic shapes and the state handling, for the variants
(relative positions and ALiBi, whose biases come from the step, grouped-query keys/values,
shared layers), two-layer models, ensembles, several positions at once and speculative
decoding. Each must give the eager model's hypotheses or logits.
"""

from __future__ import annotations

import copy

import model_helpers
import pytest
import torch
from model_helpers import AOT, CPU, GREEDY, MODERN, SOURCES, batch, hypotheses, tiny
from variants import VARIANTS as ALL

from mtkit.config import SearchConfig
from mtkit.decoding.search import generate
from mtkit.model.attention import COMPILED_QUERIES
from mtkit.model.compiled import compile_step
from mtkit.model.inference import prepare_for_inference

pytestmark = pytest.mark.usefixtures("one_thread", "compiled_dir")
# the variants exported here (tests/variants.py's): biases from the step (relative positions,
# ALiBi), one or two key/value heads, a gated feed-forward network, shared layers
VARIANTS = {name: ALL[name] for name in ("relative", "alibi_mqa_geglu", "relative_gqa_shared")}


def test_beams_wider_than_the_graph_run_eagerly() -> None:
    eager = prepare_for_inference(tiny(**MODERN), CPU)
    traced = compile_step(prepare_for_inference(tiny(**MODERN), CPU), CPU, build="export")
    graph, calls = traced.decode_step.graph, []
    traced.decode_step.graph = lambda *args: calls.append(1) or graph(*args)
    wide = SearchConfig(beam=COMPILED_QUERIES + 1, max_len_b=4)
    assert hypotheses([traced], wide, SOURCES[:1]) == hypotheses([eager], wide, SOURCES[:1])
    assert not calls


def assert_positions_at_once_equal_eager(eager: torch.nn.Module, traced: torch.nn.Module) -> None:
    """Several positions at once (speculative decoding's check) through their own graph: the
    eager model's logits after a first step, after 3 positions, and after 4 more once the
    state was rolled back to 3; a graph built on first use."""
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


@pytest.mark.parametrize("variant", VARIANTS)
def test_traced_variant_searches_and_steps_as_eager(variant: str) -> None:
    """One export per variant: its searches, then several positions at once."""
    eager = prepare_for_inference(tiny(**VARIANTS[variant]), CPU)
    traced = compile_step(
        prepare_for_inference(tiny(**VARIANTS[variant]), CPU), CPU, build="export"
    )
    model_helpers.assert_search_equals_eager(eager, traced)
    assert_positions_at_once_equal_eager(eager, traced)


def test_traced_positions_at_once_equal_eager() -> None:
    eager = prepare_for_inference(tiny(**MODERN), CPU)
    traced = compile_step(prepare_for_inference(tiny(**MODERN), CPU), CPU, build="export")
    assert_positions_at_once_equal_eager(eager, traced)


def test_traced_ensemble_equals_eager_ensemble() -> None:
    models = [tiny(), tiny(pre_norm=True)]
    eager = [prepare_for_inference(copy.deepcopy(m), CPU) for m in models]
    traced = [compile_step(prepare_for_inference(m, CPU), CPU, build="export") for m in models]
    cfg = SearchConfig(beam=2, max_len_b=6)
    assert hypotheses(traced, cfg, SOURCES[:1]) == hypotheses(eager, cfg, SOURCES[:1])


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


def test_speculative_decoding_through_compiled_steps_gives_greedy_output() -> None:
    """A compiled teacher checks a compiled draft's proposals (the draft's single positions
    through its graph, the check in one eager pass); the output is the teacher's greedy
    output, token for token, and steps went through the graphs. Teacher and draft share one
    architecture: one key. Exported graphs (the check's graph of several positions is built
    by AOTInductor as the step's is: test_compiled.py)."""
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


def test_values_of_bf16_layers_are_kept_in_bf16_with_the_same_logits(monkeypatch) -> None:
    """Values that a bf16 layer made are bf16 numbers: kept in bf16 (half the bytes a step
    reads), the steps' logits are exactly those of the same model keeping them in float32,
    through the first (eager) step and the graph's, and after a beam reorder."""
    from mtkit.model import compiled as compiled_module
    from mtkit.model.packed import onednn_available

    if not onednn_available(torch.bfloat16):
        pytest.skip("no oneDNN bf16 kernels in this build: no bf16 layers")
    src, tokens = batch([7, 4, 5], 23), batch([9, 9, 9], 29, seed=2)
    found = []
    for values in ("bf16", "float32"):
        if values == "float32":
            monkeypatch.setattr(compiled_module, "_values_dtype", lambda model: None)
        model = compile_step(
            prepare_for_inference(tiny(**MODERN), CPU, "bf16"), CPU, build="export"
        )
        with torch.inference_mode():
            state = model.start_state(model.encode(src), max_len=9)
            logits = []
            for t in range(6):
                logits.append(model.decode_step(tokens[:, t], state))
                if t == 2:
                    state.reorder(torch.tensor([2, 0, 0]))
        found.append((state.layers[0].own.v.dtype, torch.stack(logits)))
    assert [dtype for dtype, _ in found] == [torch.bfloat16, torch.float32]
    assert torch.equal(found[0][1], found[1][1])
