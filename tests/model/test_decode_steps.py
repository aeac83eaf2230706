"""Several decoding steps at once (speculative decoding's check) and rolling the state back."""

import pytest
import torch
from model_helpers import batch, tiny
from variants import variant_params

from mtkit.data.tokenizer import BOS_ID
from mtkit.model.average_attention import AverageAttention, AverageState

pytestmark = pytest.mark.usefixtures("one_thread")


def target(rows: int = 3, length: int = 9) -> torch.Tensor:
    return torch.cat([torch.full((rows, 1), BOS_ID), batch([length - 1] * rows, 29, seed=2)], 1)


@pytest.mark.parametrize("variant", variant_params())
def test_chunks_of_steps_equal_the_full_forward(variant: dict) -> None:
    model = tiny(**variant)
    src, tgt = batch([7, 4, 5], 23), target()
    with torch.no_grad():
        enc = model.encode(src)
        full = model.decode(tgt, enc).log_softmax(-1)  # (3, 9, V)
        state = model.start_state(enc, max_len=tgt.shape[1])
        start = 0
        for n in (1, 3, 2, 3):  # chunks of n positions
            out = model.decode_steps(tgt[:, start : start + n], state).log_softmax(-1)
            torch.testing.assert_close(out, full[:, start : start + n], atol=1e-5, rtol=1e-5)
            start += n
        assert state.offset == start == tgt.shape[1]


@pytest.mark.parametrize("variant", variant_params())
def test_truncate_forgets_rejected_positions_and_rows_reorder_after(variant: dict) -> None:
    model = tiny(**variant)
    src, tgt = batch([5, 6, 4], 23), target()
    wrong = torch.full((3, 3), 7)
    with torch.no_grad():
        enc = model.encode(src)
        full = model.decode(tgt, enc).log_softmax(-1)
        state = model.start_state(enc, max_len=tgt.shape[1] + 3)
        model.decode_steps(tgt[:, :2], state)
        model.decode_steps(torch.cat([tgt[:, 2:3], wrong], 1), state)  # 1 right, 3 to forget
        state.truncate(3)
        assert state.offset == 3
        model.decode_step(tgt[:, 3], state)  # one step at a time after a roll-back
        keep = torch.tensor([2, 0])  # a sentence leaves, the others swap
        state.reorder(keep, keep)
        out = model.decode_steps(tgt[keep, 4:7], state).log_softmax(-1)
    torch.testing.assert_close(out, full[keep, 4:7], atol=1e-5, rtol=1e-5)


def test_average_state_rolls_back_to_saved_sums_only() -> None:
    torch.manual_seed(0)
    layer = AverageAttention(8, 16).eval()
    x = torch.randn(2, 5, 8)
    state = AverageState.start(2, 8)
    with torch.no_grad():
        one_by_one = [layer.step(x[:, i : i + 1], state) for i in range(2)]
        three = layer.steps(x[:, 2:5], state)  # positions 2, 3, 4
        state.truncate(3)  # back to the sum after 3 steps
        again = layer.step(x[:, 3:4], state)
        full = layer(x)
    assert state.steps == 4 and not state.saved
    torch.testing.assert_close(torch.cat([*one_by_one, three], 1), full)
    torch.testing.assert_close(again, full[:, 3:4])
    with pytest.raises(ValueError, match="cannot go back from 4 steps to 1"):
        state.truncate(1)
