"""`mtkit train --compile`: the compiled step equals the eager one, one graph serves every batch
shape, and a compiled run resumes bitwise.

The graphs run on dynamo's ``aot_eager`` backend here (the forward and backward graphs that
inductor would compile, run by eager kernels): the tracing, the dynamic shapes, the autograd
graph and the random draws are the compiled step's own, and the results are bitwise eager's, so
the tests assert equality, not a tolerance. Inductor's kernels (float rounding apart, the same
graphs) are measured by benchmarks/bench_train.py --tools mtkit,mtkit-compiled, where compiling
a model takes a minute or more on 2 cores."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from subprocess_helpers import assert_same_run, train_records
from training_helpers import train_args
from variants import VARIANTS

from mtkit.checkpoint import load_checkpoint
from mtkit.config import ModelConfig, TrainConfig
from mtkit.errors import MtkitError
from mtkit.training import compiled
from mtkit.training.batching import Batch, Group
from mtkit.training.compiled import resolve_compile
from mtkit.training.step import Stepper


@pytest.fixture(autouse=True)
def aot_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiled, "BACKEND", "aot_eager")


def group(rows: int, source: int, target: int) -> Group:
    """A batch of random pairs (ids 4..39), the first source and the last target padded."""
    gen = torch.Generator().manual_seed(rows * 1000 + source * 10 + target)
    src = torch.randint(4, 40, (rows, source), generator=gen)
    tgt_in = torch.randint(4, 40, (rows, target), generator=gen)
    tgt_out = torch.randint(4, 40, (rows, target), generator=gen)
    src[0, -2:] = 1
    tgt_in[-1, -1] = tgt_out[-1, -1] = 1
    return Group([Batch(src, tgt_in, tgt_out)], [1.0], int(tgt_out.ne(1).sum()), rows, 1)


# equal source and target lengths first (duck sizing would make them one symbol), then others
SHAPES = [(3, 7, 7), (5, 4, 9), (2, 11, 3), (4, 6, 6)]
# the modern model (pre-norm, RMSNorm, rotary positions, SwiGLU, grouped keys, no biases) and
# ALiBi's per-head bias with one key head (a guard on the query length once): each traces for
# 10-30 s on 2 cores; the plain model goes through the CLI below; every variant, with inductor's
# kernels: benchmarks/compiled_train_variants.py
COVERING = ["llama_like", "alibi_mqa_geglu"]


@pytest.mark.parametrize("name", COVERING)
def test_compiled_steps_equal_eager_in_one_graph(name: str) -> None:
    layers = 1  # tracing time grows with the layers
    model = ModelConfig(
        src_vocab_size=40,
        tgt_vocab_size=40,
        d_model=32,
        ffn_dim=64,
        heads=4,
        encoder_layers=layers,
        decoder_layers=layers,
        dropout=0.1,
        attention_dropout=0.1,
        **VARIANTS[name],
    )
    runs = {}
    for mode in ("off", "on"):
        step = Stepper(TrainConfig(device="cpu", precision="fp32", compile=mode), model)
        assert step.compiling.on == (mode == "on")
        torch._dynamo.utils.counters.clear()
        torch._dynamo.utils.compilation_time_metrics.clear()
        losses = []
        for shape in SHAPES:
            losses.append(step.forward_backward(group(*shape)))
            grads = [p.grad.clone() for p in step.model.parameters()]
            step.optimizer_step()
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        runs[mode] = losses, grads, step.model.state_dict(), graphs
    (eager, eager_grads, eager_weights, none), (losses, grads, weights, graphs) = runs.values()
    assert none == 0 and graphs <= 1  # one graph for four shapes (0: traced by an earlier test)
    # traced once: floats specialised from the start, not after a first trace that tried to
    # make them inputs (a restart, which doubled the tracing time)
    assert "compile_attempt_1" not in torch._dynamo.utils.compilation_time_metrics
    assert losses == eager  # dropout on: the same masks
    assert all(torch.equal(a, b) for a, b in zip(grads, eager_grads, strict=True))
    assert all(torch.equal(weights[k], eager_weights[k]) for k in weights)


def test_compiled_run_resumes_bitwise_and_equals_eager(
    tmp_path: Path, tiny_dataset: Path, mtkit
) -> None:
    """The plain model through the CLI: one graph for every batch of all its runs (Multi30k-like
    shapes), stopped and resumed equal to straight, bitwise, and equal to eager to float
    rounding (the tied embedding sums its gradients from the graph and from the loss, which
    projects outside it, in another order than eager's autograd)."""
    runs = {"straight": 6, "stopped": 3, "eager": 6}
    torch._dynamo.utils.counters.clear()
    for run, updates in (*runs.items(), ("stopped", 6)):
        mode = "off" if run == "eager" else "on"
        extra = ("--max-updates", str(updates), "--compile", mode, "--save-every", "3", "--set")
        extra += ("log_every=1",)
        result = mtkit(*train_args(tiny_dataset, tmp_path / run, *extra))
        assert result.exit_code == 0, result.output
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] <= 1
    straight, _ = assert_same_run(tmp_path / "straight", tmp_path / "stopped")
    eager = load_checkpoint(tmp_path / "eager" / "checkpoint_last.pt")
    assert eager["update"] == straight["update"] == 6
    losses = [[r["loss"] for r in train_records(tmp_path / run)] for run in ("straight", "eager")]
    assert len(losses[0]) == 6 and losses[0] == pytest.approx(losses[1], rel=1e-5)
    for name, weight in eager["model"].items():  # key biases, whose gradient is float noise
        if not name.endswith(("qkv.bias", "kv.bias")):  # and which Adam moves by lr either way
            assert torch.allclose(straight["model"][name], weight, rtol=1e-4, atol=1e-6), name
    assert (straight["train_config"]["compile"], eager["train_config"]["compile"]) == ("on", "off")


def test_auto_compiles_on_cuda_only() -> None:
    assert resolve_compile("auto", torch.device("cuda")).on
    cpu = resolve_compile("auto", torch.device("cpu"))
    assert not cpu.on and "measured" in cpu.reason
    assert resolve_compile("on", torch.device("cpu")) == (True, "as asked")
    assert resolve_compile("off", torch.device("cuda")) == (False, "as asked")
    with pytest.raises(MtkitError, match="--compile must be one of off, on, auto"):
        resolve_compile("yes", torch.device("cpu"))


def test_the_backward_pass_recomputes_the_relu_mask_instead_of_saving_it(monkeypatch) -> None:
    """Inductor's CPU kernels write a boolean tensor 15-30x slower than ATen does (torch 2.13:
    60 ms for a transformer-small FFN's mask against 3 ms): the min-cut partitioner (inductor's)
    saved each ReLU's mask for the backward pass beside its output, which the backward pass
    needs anyway, and a compiled step ran at 0.77x eager. With views recomputed, the mask is
    computed again from the output, inside the backward's kernel."""
    from functorch.compile import make_boxed_func, min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor.decomposition import select_decomp_table

    from mtkit.model.feedforward import FeedForward

    forward_graphs = []

    def forward_compiler(graph: torch.fx.GraphModule, _) -> object:
        forward_graphs.append(graph)
        return make_boxed_func(graph.forward)

    backend = aot_autograd(
        fw_compiler=forward_compiler,
        bw_compiler=lambda graph, _: make_boxed_func(graph.forward),
        partition_fn=min_cut_rematerialization_partition,  # inductor's partitioner
        decompositions=select_decomp_table(),  # and its decompositions (the mask is one)
    )
    monkeypatch.setattr(compiled, "BACKEND", backend)
    ffn = FeedForward(32, 64)
    compiled.compile_graph(ffn)(torch.randn(3, 7, 32)).sum().backward()
    (graph,) = forward_graphs
    outputs = graph.graph.output_node().args[0]
    saved = [node.meta["val"] for node in outputs if isinstance(node, torch.fx.Node)]
    dtypes = [t.dtype for t in saved if isinstance(t, torch.Tensor)]
    assert torch.float32 in dtypes and torch.bool not in dtypes  # the ReLU's output, no mask
