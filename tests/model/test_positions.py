"""Position schemes against the papers' formulas and hand computations, and each one's
step-wise (cached) form against the full-sequence form."""

import math

import pytest
import torch
import torch.nn.functional as F

from mtkit.errors import MtkitError
from mtkit.model.positions import (
    ALiBi,
    AttentionPositions,
    LearnedPositions,
    Rotary,
    ShawRelative,
    SinusoidalPositions,
    alibi_slopes,
    causal_keep,
    sinusoidal_positions,
)


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------------------
# embedding-time


def test_sinusoidal_rows_are_todays_table() -> None:
    pos = SinusoidalPositions(50, 16)
    assert pos.state_dict() == {}  # a non-persistent buffer: checkpoints hold nothing
    torch.testing.assert_close(pos(50), sinusoidal_positions(50, 16), rtol=0, atol=0)
    torch.testing.assert_close(pos(3, offset=7), sinusoidal_positions(50, 16)[7:10])


@pytest.mark.parametrize("scheme", [SinusoidalPositions, LearnedPositions])
def test_embedding_time_rows_and_limit(scheme: type) -> None:
    pos = scheme(10, 8)
    assert pos(4, offset=6).shape == (4, 8)
    torch.testing.assert_close(pos(1, offset=5)[0], pos(10)[5])
    with pytest.raises(MtkitError, match="exceeds max_positions=10"):
        pos(5, offset=6)


def test_learned_positions_are_a_trained_table() -> None:
    pos = LearnedPositions(10, 8)
    assert list(pos.state_dict()) == ["table.weight"]
    pos(3, offset=2).sum().backward()
    grad = pos.table.weight.grad
    assert grad[2:5].eq(1).all() and grad[:2].eq(0).all() and grad[5:].eq(0).all()


# ---------------------------------------------------------------------------------------------
# rotary (Su et al. 2021)


def test_rotary_hand_computation() -> None:
    """Dh = 4: pairs (0, 2) at frequency 1 and (1, 3) at frequency 10000^(-1/2) = 0.01."""
    rot = Rotary(4, 16)
    x = torch.tensor([1.0, 2.0, 3.0, 4.0]).view(1, 1, 1, 4)
    a, b = 5.0, 5.0 * 0.01  # position 5
    expected = [
        1 * math.cos(a) - 3 * math.sin(a),
        2 * math.cos(b) - 4 * math.sin(b),
        3 * math.cos(a) + 1 * math.sin(a),
        4 * math.cos(b) + 2 * math.sin(b),
    ]
    torch.testing.assert_close(rot.rotate(x, offset=5).flatten(), torch.tensor(expected))


def test_rotary_is_ctranslate2s_sliced_layout() -> None:
    """CTranslate2's rotary_cpu.cc with interleave=false, one element at a time:
    y[i] = x[i] cos[i] + (i < Dh/2 ? -x[i + Dh/2] : x[i - Dh/2]) sin[i],
    with angles [t * inv_freq, t * inv_freq] and inv_freq[m] = base^(-2m/Dh)."""
    dh, t, base = 8, 3, 10000.0
    x = randn(dh)
    inv_freq = [base ** (-2 * m / dh) for m in range(dh // 2)]
    angle = [t * f for f in inv_freq] * 2
    y = [
        x[i] * math.cos(angle[i])
        + (-x[i + dh // 2] if i < dh // 2 else x[i - dh // 2]) * math.sin(angle[i])
        for i in range(dh)
    ]
    got = Rotary(dh, 8).rotate(x.view(1, 1, 1, dh), offset=t).flatten()
    torch.testing.assert_close(got, torch.stack(y))


def test_rotary_scores_depend_on_distance_only() -> None:
    rot = Rotary(16, 64)
    q, k = randn(2, 3, 9, 16, seed=1), randn(2, 3, 9, 16, seed=2)
    scores = rot.rotate(q, 0) @ rot.rotate(k, 0).transpose(-1, -2)
    shifted = rot.rotate(q, 7) @ rot.rotate(k, 7).transpose(-1, -2)
    torch.testing.assert_close(shifted, scores, atol=1e-5, rtol=0)
    assert not torch.allclose(rot.rotate(q, 7), rot.rotate(q, 0), atol=1e-3)  # it did rotate


def test_rotary_one_step_equals_its_row_of_the_full_rotation() -> None:
    rot = Rotary(8, 32)
    x = randn(2, 4, 10, 8)
    full = rot.rotate(x, 0)
    for t in range(10):
        torch.testing.assert_close(rot.rotate(x[:, :, t : t + 1], t), full[:, :, t : t + 1])


def test_rotary_keeps_the_norm_refuses_odd_widths_and_long_inputs() -> None:
    rot = Rotary(6, 12)
    x = randn(1, 2, 12, 6)
    torch.testing.assert_close(rot.rotate(x, 0).norm(dim=-1), x.norm(dim=-1))
    assert rot.state_dict() == {}
    with pytest.raises(ValueError, match="even"):
        Rotary(5, 12)
    with pytest.raises(MtkitError, match="max_positions=12"):
        rot.rotate(x[:, :, :2], 11)


# ---------------------------------------------------------------------------------------------
# ALiBi (Press et al. 2022)

# the paper's reference code, get_slopes(12) = get_slopes(8) + get_slopes(16)[0::2][:4]: the
# last four are 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5, as that code prints them
SLOPES_12 = [
    0.5,
    0.25,
    0.125,
    0.0625,
    0.03125,
    0.015625,
    0.0078125,
    0.00390625,
    0.7071067811865476,
    0.35355339059327384,
    0.17677669529663692,
    0.08838834764831849,
]


@pytest.mark.parametrize(
    "heads, expected",
    [
        (1, [2**-8]),
        (4, [1 / 4, 1 / 16, 1 / 64, 1 / 256]),
        (8, [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]),
        (12, SLOPES_12),
        # get_slopes(6): get_slopes(4) + get_slopes(8)[0::2][:2]
        (6, [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]),
    ],
)
def test_alibi_slopes_are_the_papers(heads: int, expected: list[float]) -> None:
    torch.testing.assert_close(alibi_slopes(heads), torch.tensor(expected), rtol=1e-6, atol=0)


def test_alibi_bias_hand_computation() -> None:
    bias = ALiBi(2).bias(3, 3, 0, causal=True)  # slopes 2^-4, 2^-8
    inf = float("-inf")
    expected_0 = [[0, inf, inf], [-1 / 16, 0, inf], [-2 / 16, -1 / 16, 0]]
    torch.testing.assert_close(bias[0], torch.tensor(expected_0))
    torch.testing.assert_close(
        ALiBi(2).bias(2, 3, 0, causal=False)[1],
        torch.tensor([[0, -1 / 256, -2 / 256], [-1 / 256, 0, -1 / 256]]),
    )


@pytest.mark.parametrize("causal", [True, False])
def test_alibi_one_step_bias_equals_its_row_of_the_full_bias(causal: bool) -> None:
    alibi = ALiBi(12)
    full = alibi.bias(9, 9, 0, causal)
    for t in range(9):
        torch.testing.assert_close(alibi.bias(1, t + 1, t, causal), full[:, t : t + 1, : t + 1])
    assert full.shape == (12, 9, 9)


def test_alibi_matches_ctranslate2s_per_key_bias_under_the_causal_mask() -> None:
    """CTranslate2 adds slope * (j - (Tk - 1)) to every query row: the same softmax."""
    alibi, t = ALiBi(4), 6
    ours = alibi.bias(t, t, 0, causal=True).softmax(-1)
    ct2 = alibi.slopes[:, None, None] * (torch.arange(t) - (t - 1)).float()  # (H, 1, Tk)
    ct2 = ct2.expand(4, t, t).masked_fill(~causal_keep(t, t, 0), float("-inf")).softmax(-1)
    torch.testing.assert_close(ours, ct2)


def test_alibi_attend_is_sdpa_plus_bias_and_steps_like_the_full_pass() -> None:
    alibi = ALiBi(4)
    q, k, v = randn(2, 4, 7, 8, seed=1), randn(2, 4, 7, 8, seed=2), randn(2, 4, 7, 8, seed=3)
    keep = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    keep[1, :, :, 5:] = False  # padding
    full = alibi.attend(q, k, v, keep, causal=True)
    mask = alibi.bias(7, 7, 0, True).masked_fill(~keep, float("-inf"))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(full, expected)
    for t in range(7):
        step = alibi.attend(
            q[:, :, t : t + 1], k[:, :, : t + 1], v[:, :, : t + 1], keep[..., : t + 1]
        )
        torch.testing.assert_close(step, full[:, :, t : t + 1], atol=1e-6, rtol=0)


# ---------------------------------------------------------------------------------------------
# Shaw et al. 2018


def test_shaw_buckets_clip_at_k() -> None:
    expected = [[2, 3, 4, 4, 4], [1, 2, 3, 4, 4], [0, 1, 2, 3, 4], [0, 0, 1, 2, 3], [0, 0, 0, 1, 2]]
    buckets = ShawRelative(4, 2).relative_buckets(5, 5, 0)
    assert buckets.dtype == torch.long and buckets.tolist() == expected
    assert ShawRelative(4, 2).relative_buckets(1, 5, 3).tolist() == [expected[3]]


def _zeroed(shaw: ShawRelative) -> ShawRelative:
    with torch.no_grad():
        shaw.keys.weight.zero_()
        shaw.values.weight.zero_()
    return shaw


@pytest.mark.parametrize("causal", [True, False])
def test_shaw_with_zero_tables_is_sdpa(causal: bool) -> None:
    shaw = _zeroed(ShawRelative(8, 3))
    q, k, v = randn(2, 4, 6, 8, seed=1), randn(2, 4, 6, 8, seed=2), randn(2, 4, 6, 8, seed=3)
    keep = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    keep[0, :, :, 4:] = False
    got = shaw.attend(q, k, v, keep, causal=causal)
    torch.testing.assert_close(
        got, AttentionPositions().attend(q, k, v, keep, causal=causal), atol=1e-6, rtol=0
    )
    mask = keep & causal_keep(6, 6, 0) if causal else keep
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


def test_shaw_attend_hand_computation() -> None:
    """One head, Dh = 1, k = 1, two positions: e_ij = q_i (k_j + aK[clip(j-i)]), z_i = sum_j
    softmax(e_i)_j (v_j + aV[clip(j-i)])."""
    shaw = ShawRelative(1, 1)
    with torch.no_grad():
        shaw.keys.weight.copy_(torch.tensor([[0.5], [0.0], [-1.0]]))  # j-i = -1, 0, +1
        shaw.values.weight.copy_(torch.tensor([[2.0], [0.0], [10.0]]))
    q, k, v = (torch.tensor(x).view(1, 1, 2, 1) for x in ([1.0, 2.0], [3.0, -1.0], [1.0, 4.0]))
    out = shaw.attend(q, k, v).flatten()
    e0 = torch.tensor([1.0 * (3 + 0), 1.0 * (-1 - 1.0)]).softmax(0)  # query 0: j-i = 0, +1
    e1 = torch.tensor([2.0 * (3 + 0.5), 2.0 * (-1 + 0)]).softmax(0)  # query 1: j-i = -1, 0
    z0 = e0[0] * (1 + 0) + e0[1] * (4 + 10)
    z1 = e1[0] * (1 + 2) + e1[1] * (4 + 0)
    torch.testing.assert_close(out, torch.stack([z0, z1]))


def test_shaw_one_query_equals_its_row_of_the_full_computation() -> None:
    shaw = ShawRelative(8, 2)
    q, k, v = randn(3, 2, 7, 8, seed=4), randn(3, 2, 7, 8, seed=5), randn(3, 2, 7, 8, seed=6)
    full = shaw.attend(q, k, v, causal=True)
    for t in range(7):
        step = shaw.attend(q[:, :, t : t + 1], k[:, :, : t + 1], v[:, :, : t + 1], q_offset=t)
        torch.testing.assert_close(step, full[:, :, t : t + 1], atol=1e-6, rtol=0)
        default = shaw.attend(q[:, :, t : t + 1], k[:, :, : t + 1], v[:, :, : t + 1])
        torch.testing.assert_close(default, step)  # q_offset defaults to Tk - Tq


def test_shaw_dropout_only_in_training_and_tables_learn() -> None:
    shaw = ShawRelative(4, 2)
    q, k, v = randn(1, 1, 5, 4), randn(1, 1, 5, 4, seed=1), randn(1, 1, 5, 4, seed=2)
    eval_out = shaw.attend(q, k, v, dropout_p=0.5, training=False)
    torch.testing.assert_close(eval_out, shaw.attend(q, k, v))
    shaw.attend(q, k, v, causal=True).sum().backward()
    assert shaw.keys.weight.grad.abs().sum() > 0 and shaw.values.weight.grad.abs().sum() > 0


# ---------------------------------------------------------------------------------------------
# the shared interface


def test_plain_attend_is_sdpa_full_and_stepwise() -> None:
    plain = AttentionPositions()
    q, k, v = randn(2, 2, 5, 4, seed=7), randn(2, 2, 5, 4, seed=8), randn(2, 2, 5, 4, seed=9)
    full = plain.attend(q, k, v, causal=True)
    torch.testing.assert_close(full, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert plain.rotate(q, 3) is q
    for t in range(1, 5):  # a causal block of 2 queries at offset t - 1 over t + 1 keys
        block = plain.attend(
            q[:, :, t - 1 : t + 1], k[:, :, : t + 1], v[:, :, : t + 1], causal=True
        )
        torch.testing.assert_close(block, full[:, :, t - 1 : t + 1])
