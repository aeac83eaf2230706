"""FeedForward: each activation against a hand computation; the gated width rule; the ReLU
kind is the FeedForward it replaced (layers.FeedForward until issue 12), state dict and outputs."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mtkit.model.feedforward import FeedForward, gated_hidden_size


def _set(linear: nn.Linear, weight: list[list[float]], bias: list[float]) -> None:
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(weight))
        linear.bias.copy_(torch.tensor(bias))


def _silu(v: float) -> float:
    return v / (1 + torch.exp(torch.tensor(-v)).item())


def _gelu(v: float) -> float:
    return 0.5 * v * (1 + torch.erf(torch.tensor(v / 2**0.5)).item())


def _relu(v: float) -> float:
    return max(v, 0.0)


@pytest.mark.parametrize("activation, act", [("relu", _relu), ("gelu", _gelu), ("silu", _silu)])
def test_ungated_equals_hand_computation(activation: str, act) -> None:
    ffn = FeedForward(2, 2, activation, bias=True)
    _set(ffn.fc1, [[1.0, -1.0], [0.5, 2.0]], [0.1, -3.0])
    _set(ffn.fc2, [[1.0, 2.0], [-1.0, 0.5]], [0.0, 1.0])
    x = [2.0, 1.0]
    h = [act(2.0 - 1.0 + 0.1), act(1.0 + 2.0 - 3.0)]  # fc1(x) = [1.1, 0.0]
    expected = [h[0] + 2 * h[1], -h[0] + 0.5 * h[1] + 1.0]
    torch.testing.assert_close(ffn(torch.tensor([x])), torch.tensor([expected]))


@pytest.mark.parametrize("activation, act", [("swiglu", _silu), ("geglu", _gelu)])
def test_gated_equals_hand_computation(activation: str, act) -> None:
    """Shazeer 2020, eq. 6: FFN(x) = (act(x W) * x V) W2, W = gate, V = fc1, W2 = fc2."""
    ffn = FeedForward(2, 12, activation, bias=True)  # 12 -> hidden 8
    assert ffn.gate is not None and ffn.fc1.out_features == 8
    w = torch.zeros(8, 2)
    w[0], w[1] = torch.tensor([1.0, 0.0]), torch.tensor([0.0, -2.0])
    v = torch.zeros(8, 2)
    v[0], v[1] = torch.tensor([3.0, 1.0]), torch.tensor([1.0, 1.0])
    out = torch.zeros(2, 8)
    out[0, 0], out[0, 1], out[1, 1] = 1.0, 2.0, -1.0
    with torch.no_grad():
        ffn.gate.weight.copy_(w)
        ffn.fc1.weight.copy_(v)
        ffn.fc2.weight.copy_(out)
        for linear in (ffn.gate, ffn.fc1, ffn.fc2):
            linear.bias.zero_()
        ffn.fc2.bias.copy_(torch.tensor([0.5, 0.0]))
    x1, x2 = 1.5, -0.5
    h0 = act(x1) * (3 * x1 + x2)  # unit 0: gate 1.5, value 4.0
    h1 = act(-2 * x2) * (x1 + x2)  # unit 1: gate 1.0, value 1.0
    expected = torch.tensor([[h0 + 2 * h1 + 0.5, -h1]])
    torch.testing.assert_close(ffn(torch.tensor([[x1, x2]])), expected)


@pytest.mark.parametrize("activation", ["swiglu", "geglu"])
def test_gated_keeps_the_parameter_count_within_one_percent(activation: str) -> None:
    def count(m: nn.Module) -> int:
        return sum(p.numel() for p in m.parameters())

    relu, gated = FeedForward(256, 1024, "relu"), FeedForward(256, 1024, activation)
    assert gated.fc1.out_features == gated.gate.out_features == 680
    assert abs(count(gated) - count(relu)) / count(relu) < 0.01


@pytest.mark.parametrize(
    "ffn_dim, hidden", [(1024, 680), (2048, 1368), (4096, 2728), (3072, 2048), (12, 8), (1, 8)]
)
def test_gated_hidden_size(ffn_dim: int, hidden: int) -> None:
    assert gated_hidden_size(ffn_dim) == hidden
    assert hidden % 8 == 0
    if ffn_dim >= 12:
        assert abs(hidden - 2 * ffn_dim / 3) <= 4


class OldFeedForward(nn.Module):
    """mtkit.model.layers.FeedForward as it was before the variants, verbatim."""

    def __init__(self, d_model: int, ffn_dim: int, activation_dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, d_model)
        self.activation_dropout = nn.Dropout(activation_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.activation_dropout(F.relu(self.fc1(x))))


def test_relu_kind_loads_the_old_feedforward() -> None:
    torch.manual_seed(0)
    old = OldFeedForward(16, 40, activation_dropout=0.1).eval()
    new = FeedForward(16, 40, "relu", bias=True, activation_dropout=0.1).eval()
    assert new.state_dict().keys() == old.state_dict().keys()
    new.load_state_dict(old.state_dict(), strict=True)
    x = torch.randn(3, 5, 16)
    torch.testing.assert_close(new(x), old(x), rtol=0, atol=0)


@pytest.mark.parametrize("activation", ["relu", "gelu", "silu", "swiglu", "geglu"])
def test_bias_false_leaves_no_bias_and_every_weight_is_a_linear(activation: str) -> None:
    ffn = FeedForward(8, 32, activation, bias=False)
    assert all(name.endswith("weight") for name, _ in ffn.named_parameters())
    linears = [m for m in ffn.modules() if isinstance(m, nn.Linear)]
    assert sum(m.weight.numel() for m in linears) == sum(p.numel() for p in ffn.parameters())
    assert ffn(torch.randn(2, 3, 8)).shape == (2, 3, 8)


def test_unknown_activation_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known: relu, gelu, silu, swiglu, geglu"):
        FeedForward(8, 32, "tanh")
