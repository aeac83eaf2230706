"""Pure search functions, tested on hand-made tensors (no model)."""

import math

import pytest
import torch

from mtkit.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from mtkit.decoding.batching import pad_batch
from mtkit.decoding.beam import (
    Candidates,
    ban_repeated_ngrams,
    beam_candidates,
    constrain,
    finished_mask,
    length_penalty,
    max_target_lengths,
    select_active,
)

INF = math.inf


@pytest.mark.parametrize(
    ("length", "alpha", "style", "expected"),
    [
        (4.0, 0.0, "fairseq", 1.0),
        (4.0, 1.0, "fairseq", 4.0),
        (9.0, 0.5, "fairseq", 3.0),
        (1.0, 1.0, "gnmt", 1.0),
        (7.0, 1.0, "gnmt", 2.0),
        (7.0, 2.0, "gnmt", 4.0),
        (7.0, 0.0, "gnmt", 1.0),
    ],
)
def test_length_penalty(length: float, alpha: float, style: str, expected: float) -> None:
    assert length_penalty(length, alpha, style) == pytest.approx(expected)


def test_length_penalty_on_tensors_and_unknown_style() -> None:
    out = length_penalty(torch.tensor([1.0, 4.0]), 2.0)
    assert out.tolist() == [1.0, 16.0]
    with pytest.raises(ValueError, match="unknown length penalty"):
        length_penalty(3.0, 1.0, "marian")


@pytest.mark.parametrize(
    ("history", "n", "banned"),
    [
        ([5, 6, 7, 5], 2, {6}),  # "5 6" exists, last token 5
        ([5, 6, 5, 6], 3, {5}),  # "5 6 5" exists, last two tokens "5 6"
        ([5, 6, 7, 8], 2, set()),  # last token 8 never seen before
        ([5, 6, 7], 1, {5, 6, 7}),  # unigrams: nothing generated may come back
        ([5, 5], 2, {5}),
        ([5], 2, set()),  # shorter than n: nothing to repeat
        ([5, 6, 5, 7, 5], 2, {6, 7}),  # every continuation of 5 seen so far
    ],
)
def test_ban_repeated_ngrams(history: list[int], n: int, banned: set[int]) -> None:
    lprobs = torch.zeros(1, 10)
    ban_repeated_ngrams(lprobs, torch.tensor([history]), n)
    assert {i for i in range(1, 10) if lprobs[0, i] == -INF} == banned  # PAD may be hit too


def test_ban_repeated_ngrams_is_per_row() -> None:
    lprobs = torch.zeros(2, 10)
    ban_repeated_ngrams(lprobs, torch.tensor([[5, 6, 5], [7, 8, 9]]), 2)
    assert lprobs[0, 6] == -INF and lprobs[1, 1:].isfinite().all()


def rules(lprobs: torch.Tensor, step: int, max_lens: list[int], **kw) -> torch.Tensor:
    history = torch.full((lprobs.shape[0], step), 5)
    lens = torch.tensor(max_lens)
    return constrain(lprobs.clone(), step, history, lens, min(max_lens), **kw)


def test_constrain_bans_pad_and_bos_and_penalises_unk() -> None:
    out = rules(torch.zeros(2, 8), step=0, max_lens=[5, 5], unk_penalty=1.5)
    assert (out[:, PAD_ID] == -INF).all() and (out[:, BOS_ID] == -INF).all()
    assert out[:, UNK_ID].tolist() == [-1.5, -1.5]
    assert out[:, EOS_ID].tolist() == [0.0, 0.0] and (out[:, 4:] == 0).all()


def test_constrain_min_len_bans_eos_until_reached() -> None:
    assert rules(torch.zeros(1, 8), step=2, max_lens=[9], min_len=3)[0, EOS_ID] == -INF
    assert rules(torch.zeros(1, 8), step=3, max_lens=[9], min_len=3)[0, EOS_ID] == 0


def test_constrain_forces_eos_at_each_rows_max_len() -> None:
    lprobs = torch.full((2, 8), -2.0)
    out = rules(lprobs, step=4, max_lens=[4, 6])
    assert out[0].isfinite().tolist() == [False, False, False, True] + [False] * 4
    assert out[0, EOS_ID] == -2.0
    assert out[1, 4:].isfinite().all()  # the second row may go on


def test_constrain_forcing_one_row_keeps_min_len_on_the_others() -> None:
    out = constrain(torch.zeros(2, 8), 1, torch.full((2, 1), 5), torch.tensor([1, 9]), 1, min_len=3)
    assert out[1, EOS_ID] == -INF  # row 1 is below min_len: still no EOS


@pytest.mark.parametrize("ages", [[0, 1, 2, 3], [5, 6, 7, 8], [9, 9, 9, 9]])
def test_constrain_with_each_rows_own_step_forces_only_the_rows_at_their_limit(ages) -> None:
    """Rows that joined a running decode each count their own steps: the rows at their length
    limit may only end (exactly the full-width rule), the others are untouched."""
    lprobs = torch.randn(4, 50, generator=torch.Generator().manual_seed(sum(ages)))
    lens, step = torch.tensor([3, 9, 7, 20]), torch.tensor(ages)
    out = constrain(lprobs.clone(), step, torch.full((4, 1), 5), lens, 3)
    expected = lprobs.clone()
    expected[:, [PAD_ID, BOS_ID]] = -INF
    forced = lens.le(step)
    expected[forced] = -INF
    expected[forced, EOS_ID] = lprobs[forced, EOS_ID]
    assert torch.equal(out, expected)


def test_constrain_no_repeat_falls_back_to_eos_when_everything_is_banned() -> None:
    lprobs = torch.zeros(1, 6)  # UNK, 4 and 5 all used, EOS banned by min_len
    history = torch.tensor([[UNK_ID, 4, 5]])
    out = constrain(lprobs, 3, history, torch.tensor([9]), 9, min_len=5, no_repeat_ngram=1)
    assert out[0].isfinite().tolist() == [False, False, False, True, False, False]


def test_beam_candidates_scripted() -> None:
    # 1 sentence, 2 beams, vocabulary 5; beam scores -1 and -2
    lprobs = torch.log(torch.tensor([[[0, 0, 0, 0.1, 0.9], [0, 0, 0, 0.6, 0.4]]]))
    cand = beam_candidates(lprobs, torch.tensor([[-1.0, -2.0]]), count=4)
    expected = [-1 + math.log(0.9), -2 + math.log(0.6), -2 + math.log(0.4), -1 + math.log(0.1)]
    assert cand.scores[0].tolist() == pytest.approx(expected)
    assert cand.beams.tolist() == [[0, 1, 1, 0]]
    assert cand.tokens.tolist() == [[4, EOS_ID, 4, EOS_ID]]
    assert cand.flat.tolist() == [[4, 8, 9, 3]]


def test_beam_candidates_first_step_has_one_beam_per_sentence() -> None:
    lprobs = torch.log_softmax(torch.randn(2, 1, 7), -1)  # 2 sentences, 1 live beam each
    cand = beam_candidates(lprobs, torch.zeros(2, 1), count=6)
    assert cand.scores.shape == (2, 6) and (cand.beams == 0).all()
    torch.testing.assert_close(cand.scores, lprobs[:, 0].topk(6).values)


@pytest.mark.parametrize("chunk", [128, 5, 1, 3])  # one chunk; whole chunks and tails
@pytest.mark.parametrize(("n", "w", "v", "count"), [(3, 4, 50, 8), (2, 5, 7, 10), (1, 3, 4, 6)])
def test_beam_candidates_equal_one_topk_over_all_beams_and_tokens(n, w, v, count, chunk) -> None:
    torch.manual_seed(n * 100 + v)
    lprobs = torch.log_softmax(torch.randn(n, w, v) * 3, -1)
    lprobs[0, 0, 2:] = -INF  # a beam with fewer finite tokens than count
    scores = torch.randn(n, w) * 2
    cand = beam_candidates(lprobs, scores, count, chunk)
    total = (scores.unsqueeze(-1) + lprobs).view(n, w * v)
    expected = total.topk(min(count, w * v), dim=1)
    assert torch.equal(cand.scores, expected.values)
    assert torch.equal(cand.flat, cand.beams * v + cand.tokens)
    assert torch.equal(total.gather(1, cand.flat), cand.scores)  # each candidate is what it says
    finite = expected.values.isfinite()
    assert torch.equal(cand.flat[finite], expected.indices[finite])  # random values: no ties


@pytest.mark.parametrize("chunk", [128, 16, 7])
def test_beam_candidates_with_ties_are_the_top_values_and_distinct(chunk) -> None:
    # bf16 logits repeat values: many candidates tie, across chunks and beams
    torch.manual_seed(7)
    lprobs = torch.log_softmax(torch.randn(4, 5, 300).bfloat16().float(), -1).round(decimals=1)
    scores = torch.randn(4, 5).round(decimals=1)
    cand = beam_candidates(lprobs, scores, 10, chunk)
    total = (scores.unsqueeze(-1) + lprobs).view(4, 5 * 300)
    assert torch.equal(cand.scores, total.topk(10, dim=1).values)
    assert torch.equal(total.gather(1, cand.flat), cand.scores)
    assert all(len(set(row)) == 10 for row in cand.flat.tolist())


def test_finished_mask_keeps_top_k_finite_eos_only() -> None:
    cand = Candidates(
        scores=torch.tensor([[-1.0, -2.0, -3.0, -4.0], [-INF, -INF, -INF, -INF]]),
        beams=torch.zeros(2, 4, dtype=torch.long),
        tokens=torch.tensor([[EOS_ID, 5, 6, EOS_ID], [EOS_ID, 5, 6, 7]]),
        flat=torch.zeros(2, 4, dtype=torch.long),
    )
    assert finished_mask(cand, beam=2).tolist() == [[True, False, False, False], [False] * 4]


@pytest.mark.parametrize(
    ("tokens", "beam", "expected"),
    [
        ([[3, 7, 3, 8]], 2, [[1, 3]]),
        ([[7, 8, 9, 3]], 2, [[0, 1]]),
        ([[3, 3, 5, 6, 7, 8]], 3, [[2, 3, 4]]),
    ],
)
def test_select_active(tokens: list[list[int]], beam: int, expected: list[list[int]]) -> None:
    assert select_active(torch.tensor(tokens), beam).tolist() == expected


def test_max_target_lengths() -> None:
    src = torch.tensor([[5, 6, 7, EOS_ID], [5, EOS_ID, PAD_ID, PAD_ID], [EOS_ID, 0, 0, 0]])
    assert max_target_lengths(src, 1.5, 2, min_len=0, cap=100).tolist() == [6, 3, 2]
    assert max_target_lengths(src, 1.5, 2, min_len=3, cap=5).tolist() == [5, 3, 3]
    # a leading target-language tag (issue 16) is not a source piece; elsewhere it counts
    tagged = torch.tensor([[5, 6, 7, EOS_ID], [6, 5, EOS_ID, PAD_ID]])
    assert max_target_lengths(tagged, 2.0, 0, 0, 100, tags=(5,)).tolist() == [4, 4]
    assert max_target_lengths(tagged, 2.0, 0, 0, 100).tolist() == [6, 4]


def test_pad_batch() -> None:
    assert pad_batch([[5, 3], [7, 8, 9, 3]]).tolist() == [[5, 3, 0, 0], [7, 8, 9, 3]]
