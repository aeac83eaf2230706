"""The Average Attention Network (Zhang, Xiong & Su 2018): the cumulative average and the gate
by hand; the O(1) decoding step against the parallel form, across beam reorders."""

import math

import pytest
import torch
from torch import nn

from mtkit.model.average_attention import AverageAttention, AverageState, cumulative_average


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def tiny(use_ffn: bool = True) -> AverageAttention:
    torch.manual_seed(0)
    return AverageAttention(8, 16, dropout=0.0, bias=True, use_ffn=use_ffn).eval()


def test_cumulative_average_equals_a_hand_loop() -> None:
    x = randn(3, 6, 5)
    expected = torch.empty_like(x)
    for b in range(3):
        total = torch.zeros(5)
        for j in range(6):
            total = total + x[b, j]
            expected[b, j] = total / (j + 1)
    torch.testing.assert_close(cumulative_average(x), expected)


@pytest.mark.parametrize("use_ffn", [True, False])
def test_gate_equals_hand_computation(use_ffn: bool) -> None:
    """With W = 0: i = sigmoid(log 3) = 3/4, f = sigmoid(0) = 1/2, so h = 3/4 y + 1/2 g; with the
    FFN set to identity matrices, g = relu(average)."""
    aan = AverageAttention(2, 2, use_ffn=use_ffn)
    with torch.no_grad():
        aan.gate.weight.zero_()
        aan.gate.bias.copy_(torch.tensor([math.log(3.0), math.log(3.0), 0.0, 0.0]))
        if use_ffn:
            for linear in (aan.ffn.fc1, aan.ffn.fc2):
                linear.weight.copy_(torch.eye(2))
                linear.bias.zero_()
    y = torch.tensor([[[1.0, -3.0], [3.0, -1.0]]])
    average = torch.tensor([[[1.0, -3.0], [2.0, -2.0]]])
    g = average.clamp(min=0) if use_ffn else average
    torch.testing.assert_close(aan(y), 0.75 * y + 0.5 * g)


@pytest.mark.parametrize("use_ffn", [True, False])
def test_steps_equal_the_parallel_form(use_ffn: bool) -> None:
    aan = tiny(use_ffn)
    x = randn(3, 6, 8, seed=1)
    full = aan(x)
    state = aan.start_state(3, x)
    steps = [aan.step(x[:, t : t + 1], state) for t in range(6)]
    assert state.steps == 6
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "rows",
    [[2, 0, 3, 1], [3, 1], [0, 0, 2, 2]],
    ids=["permuted", "sentences-leave", "beams-copied"],
)
def test_steps_with_a_reorder_equal_the_parallel_form_on_reordered_inputs(
    rows: list[int],
) -> None:
    aan = tiny()
    x = randn(4, 6, 8, seed=2)
    index = torch.tensor(rows)
    state = AverageState.start(4, 8)
    before = [aan.step(x[:, t : t + 1], state) for t in range(3)]
    torch.testing.assert_close(torch.cat(before, dim=1), aan(x)[:, :3], atol=1e-5, rtol=0)
    state.reorder(index)
    moved = x.index_select(0, index)  # each row's history follows it
    after = [aan.step(moved[:, t : t + 1], state) for t in range(3, 6)]
    torch.testing.assert_close(torch.cat(after, dim=1), aan(moved)[:, 3:], atol=1e-5, rtol=0)


def test_output_at_j_ignores_later_inputs() -> None:
    aan = tiny()
    x = randn(2, 5, 8, seed=3)
    changed = x.clone()
    changed[:, 3:] += 10.0
    torch.testing.assert_close(aan(changed)[:, :3], aan(x)[:, :3])


def test_state_starts_empty_and_every_weight_is_a_linear() -> None:
    state = AverageState.start(5, 8, dtype=torch.float64)
    assert state.total.shape == (5, 1, 8) and state.total.dtype == torch.float64
    assert state.steps == 0 and not state.total.any()
    aan = tiny()
    assert list(aan.state_dict()) == [
        "ffn.fc1.weight",
        "ffn.fc1.bias",
        "ffn.fc2.weight",
        "ffn.fc2.bias",
        "gate.weight",
        "gate.bias",
    ]
    linears = [m for m in aan.modules() if isinstance(m, nn.Linear)]
    assert sum(p.numel() for m in linears for p in m.parameters()) == sum(
        p.numel() for p in aan.parameters()
    )
    no_bias = AverageAttention(8, 16, bias=False, use_ffn=False)
    assert list(no_bias.state_dict()) == ["gate.weight"]


def test_state_is_a_row_state_of_constant_size() -> None:
    """The decoder keeps an AverageState per layer (mtkit.model.state.RowState): one D-vector
    per row, whatever the number of steps."""
    aan = tiny()
    state = aan.start(torch.zeros(1, dtype=torch.float32), rows=3, max_len=100)
    sizes = []
    for t in range(4):
        aan.step(randn(3, 1, 8, seed=t), state)
        sizes.append(state.nbytes())
    assert sizes == [3 * 8 * 4] * 4
    state.reorder(torch.tensor([0, 2]))
    assert state.nbytes() == 2 * 8 * 4
