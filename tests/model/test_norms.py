"""build_norm: names to torch's norms; RMSNorm against a hand computation."""

import pytest
import torch
from torch import nn

from mtkit.model.norms import build_norm


def test_rmsnorm_equals_hand_computation() -> None:
    """Zhang & Sennrich 2019, eq. 4: x / sqrt(mean(x^2) + eps) * g."""
    norm = build_norm("rmsnorm", 4, eps=1e-6, bias=False)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 2.0, 0.5, -1.0]))
    x = torch.tensor([[1.0, -2.0, 3.0, 0.0]])
    rms = ((1 + 4 + 9 + 0) / 4 + 1e-6) ** 0.5  # sqrt(3.5 + eps)
    expected = torch.tensor([[1 / rms, -4 / rms, 1.5 / rms, 0.0]])
    torch.testing.assert_close(norm(x), expected)


def test_rmsnorm_is_scale_invariant_and_uncentred() -> None:
    norm = build_norm("rmsnorm", 8, eps=0.0, bias=False)
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0)) + 5.0
    torch.testing.assert_close(norm(7.0 * x), norm(x))
    assert norm(x).mean(-1).abs().min() > 0.1  # the mean is not removed, unlike LayerNorm
    assert [name for name, _ in norm.named_parameters()] == ["weight"]


@pytest.mark.parametrize("bias", [True, False])
def test_layernorm_is_torchs_with_or_without_bias(bias: bool) -> None:
    norm = build_norm("layernorm", 6, eps=1e-5, bias=bias)
    assert isinstance(norm, nn.LayerNorm) and norm.eps == 1e-5
    assert (norm.bias is not None) == bias
    x = torch.randn(2, 6, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(norm(x), nn.functional.layer_norm(x, (6,), eps=1e-5))


def test_default_layernorm_state_dict_matches_todays_norm() -> None:
    """Today's layers use nn.LayerNorm(d_model): the same keys, so old checkpoints load."""
    assert (
        build_norm("layernorm", 8, 1e-5, True).state_dict().keys()
        == nn.LayerNorm(8).state_dict().keys()
    )


def test_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known: layernorm, rmsnorm"):
        build_norm("batchnorm", 4, 1e-5, False)


def test_rmsnorm_refuses_a_bias() -> None:
    with pytest.raises(ValueError, match="no bias"):
        build_norm("rmsnorm", 4, 1e-6, True)
