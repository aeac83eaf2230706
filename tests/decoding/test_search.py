"""Search on a scripted fake decoder (exact tokens and scores) and on tiny random Transformers."""

import dataclasses
import itertools
import math

import pytest
import torch
from search_helpers import (
    all_sequences,
    forced_logprob,
    forced_logprobs,
    forced_steps,
    same,
    sources,
    tiny_model,
)
from torch import Tensor, nn
from variants import variant_params

from mtkit.config import SearchConfig
from mtkit.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from mtkit.decoding import Hypothesis, generate
from mtkit.decoding.beam import length_penalty
from mtkit.decoding.beam_search import BeamSearch
from mtkit.decoding.ensemble import Ensemble
from mtkit.decoding.stepper import run
from mtkit.errors import MtkitError
from mtkit.model.transformer import Transformer

pytestmark = pytest.mark.usefixtures("one_thread")


A, B = 4, 5

# ---------------------------------------------------------------------------------------------
# A decoder whose next-token distribution is a table lookup on the prefix


@dataclasses.dataclass
class PrefixCache:
    prefix: Tensor  # (R, t) tokens fed so far, BOS first

    def reorder(self, rows: Tensor, sources: Tensor | None = None) -> None:
        self.prefix = self.prefix.index_select(0, rows)  # the table ignores the source

    def truncate(self, length: int) -> None:
        self.prefix = self.prefix[:, :length]  # the tokens fed at positions 0..length-1

    def attended(self, row: int) -> None:
        return None  # no cross-attention to record


class ScriptedModel(nn.Module):
    """P(next | prefix) from ``table`` (prefix without BOS -> {token: prob}); EOS elsewhere."""

    def __init__(self, table: dict[tuple[int, ...], dict[int, float]], vocab: int = 8) -> None:
        super().__init__()
        self.table = table
        self.tgt_vocab_size, self.max_positions = vocab, 64
        self.tag_ids: tuple[int, ...] = ()
        self.unused = nn.Parameter(torch.zeros(1))

    def encode(self, src: Tensor) -> Tensor:
        return src

    def start_state(self, enc: Tensor, max_len: int) -> PrefixCache:
        return PrefixCache(torch.zeros(enc.shape[0], 0, dtype=torch.long))

    def decode_step(self, tokens: Tensor, cache: PrefixCache) -> Tensor:
        cache.prefix = torch.cat([cache.prefix, tokens[:, None]], dim=1)
        probs = torch.zeros(len(tokens), self.tgt_vocab_size)
        for row, prefix in enumerate(cache.prefix[:, 1:].tolist()):
            for token, p in self.table.get(tuple(prefix), {EOS_ID: 1.0}).items():
                probs[row, token] = p
        return probs.log()  # logits whose log_softmax is log(probs)


# greedy takes A (0.6) then A (0.4): "A A" has p = 0.24; "B" has p = 0.4 * 0.9 = 0.36
GARDEN_PATH = {
    (): {A: 0.6, B: 0.4},
    (A,): {A: 0.4, B: 0.3, EOS_ID: 0.3},
    (B,): {EOS_ID: 0.9, A: 0.1},
}
ONE_SOURCE = torch.tensor([[6, EOS_ID]])


def search(model: nn.Module, src: Tensor = ONE_SOURCE, **kw) -> list[list[Hypothesis]]:
    return generate([model], src, SearchConfig(**{"lenpen": 0.0, **kw}))


def test_scripted_greedy_follows_the_garden_path() -> None:
    (best,) = search(ScriptedModel(GARDEN_PATH), beam=1)[0]
    assert best.tokens == [A, A]
    assert best.logprob == pytest.approx(math.log(0.6 * 0.4))
    assert best.score == pytest.approx(best.logprob)  # lenpen 0


def test_scripted_beam_finds_the_better_short_hypothesis() -> None:
    hyps = search(ScriptedModel(GARDEN_PATH), beam=2, nbest=2)[0]
    assert [h.tokens for h in hyps] == [[B], [A, A]]
    assert [h.logprob for h in hyps] == pytest.approx([math.log(0.36), math.log(0.24)])


def test_scripted_length_penalty_can_prefer_the_longer_hypothesis() -> None:
    hyps = search(ScriptedModel(GARDEN_PATH), beam=2, nbest=2, lenpen=1.0)[0]
    assert [h.tokens for h in hyps] == [[A, A], [B]]  # log(.24)/3 > log(.36)/2
    assert hyps[0].score == pytest.approx(math.log(0.24) / 3)


def test_scripted_max_len_forces_eos() -> None:
    model = ScriptedModel(
        {
            (): {A: 0.99, EOS_ID: 0.01},
            (A,): {A: 0.99, EOS_ID: 0.01},
            (A, A): {A: 0.99, EOS_ID: 0.01},
        }
    )
    (greedy,) = search(model, beam=1, max_len_a=0.0, max_len_b=2)[0]
    assert greedy.tokens == [A, A]
    assert greedy.logprob == pytest.approx(2 * math.log(0.99) + math.log(0.01))
    hyps = search(model, beam=3, nbest=3, min_len=0, max_len_a=0.0, max_len_b=2)[0]
    assert [h.tokens for h in hyps] == [[], [A], [A, A]]  # lenpen 0: shorter is likelier


# ---------------------------------------------------------------------------------------------
# Tiny random Transformers


SEARCH_RULES = [
    dict(lenpen=1.0),
    dict(lenpen=0.6, lenpen_style="gnmt"),
    dict(no_repeat_ngram=2, min_len=3, unk_penalty=0.5),
]


@pytest.mark.parametrize("config", SEARCH_RULES)
def test_beam_one_equals_greedy(config: dict) -> None:
    model, src = tiny_model(), sources([5, 9, 2, 7])
    cfg = SearchConfig(beam=1, **config)
    greedy = generate([model], src, cfg)
    with torch.inference_mode():
        beam = run(BeamSearch(Ensemble([model]), src, cfg))
    same(greedy, beam)


@pytest.mark.parametrize("variant", variant_params())
def test_every_variant_beam_one_equals_greedy_and_batches_equal_single(variant: dict) -> None:
    """Greedy vs beam 1; beam 3 over a batch (beams moving, sentences leaving, beams sharing
    their source) vs each sentence alone; an ensemble of the model with itself vs the model."""
    model, src = tiny_model(**variant), sources([5, 9, 2, 7])
    cfg = SearchConfig(beam=1, lenpen=1.0)
    greedy = generate([model], src, cfg)
    with torch.inference_mode():
        beam = run(BeamSearch(Ensemble([model]), src, cfg))
    same(greedy, beam)
    cfg = SearchConfig(beam=3, nbest=3)
    together = generate([model], src, cfg)
    same(together, [generate([model], row[row.ne(PAD_ID)][None], cfg)[0] for row in src])
    same(generate([model, model], src, cfg), together)


@pytest.mark.parametrize(("lenpen", "style"), [(0.0, "fairseq"), (1.0, "fairseq"), (2.0, "gnmt")])
def test_wide_beam_equals_exhaustive_search(lenpen: float, style: str) -> None:
    """Vocabulary 8 leaves 5 generable tokens besides EOS (UNK, 4..7; PAD and BOS are banned).

    With at most 3 tokens before EOS there are 1 + 5 + 25 + 125 = 156 hypotheses. A step never
    has more than 25 * 6 = 150 finite candidates, so with a beam of 160 every finite candidate
    is among the top K: each EOS candidate is finished, every other one stays live, and no
    sentence stops early (it would need 160 finished). The search is exhaustive.
    """
    model, src = tiny_model(vocab=8, seed=3), sources([4], vocab=8)
    cfg = SearchConfig(
        beam=160, nbest=5, lenpen=lenpen, lenpen_style=style, min_len=0, max_len_a=0.0, max_len_b=3
    )
    found = generate([model], src, cfg)[0]
    seqs = all_sequences([UNK_ID, 4, 5, 6, 7], 3)
    logprobs = forced_logprobs(model, src[0], seqs)
    scored = [
        (lp / length_penalty(len(seq) + 1.0, lenpen, style), seq, lp)
        for seq, lp in zip(seqs, logprobs, strict=True)
    ]
    scored.sort(key=lambda x: -x[0])
    assert [h.tokens for h in found] == [seq for _, seq, _ in scored[:5]]
    assert [h.score for h in found] == pytest.approx([s for s, _, _ in scored[:5]], abs=1e-5)


@pytest.mark.parametrize("beam", [1, 4])
def test_batched_equals_one_at_a_time(beam: int) -> None:
    model, src = tiny_model(), sources([3, 11, 1, 7, 7, 5])
    cfg = SearchConfig(beam=beam, nbest=beam)
    together = generate([model], src, cfg)
    alone = [generate([model], row[row.ne(PAD_ID)][None], cfg)[0] for row in src]
    same(together, alone)


@pytest.mark.parametrize("beam", [1, 5])
def test_nbest_logprobs_equal_forced_decoding(beam: int) -> None:
    model, src = tiny_model(), sources([6, 3, 9])
    cfg = SearchConfig(beam=beam, nbest=beam, lenpen=1.0)
    for row, hyps in zip(src, generate([model], src, cfg), strict=True):
        assert len(hyps) == beam
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for h in hyps:
            assert EOS_ID not in h.tokens and BOS_ID not in h.tokens
            assert h.logprob == pytest.approx(forced_logprob(model, row, h.tokens), abs=1e-4)
            # per token (EOS last): the terms of logprob, each the teacher-forced value
            assert len(h.token_logprobs) == len(h.tokens) + 1
            assert sum(h.token_logprobs) == pytest.approx(h.logprob, abs=1e-5)
            assert h.token_logprobs == pytest.approx(forced_steps(model, row, h.tokens), abs=1e-4)
            assert h.score == pytest.approx(h.logprob / (len(h.tokens) + 1), abs=1e-5)


def repeats(tokens: list[int], n: int) -> bool:
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


@pytest.mark.parametrize("beam", [1, 3])
def test_no_repeat_ngram_prevents_repeats(beam: int) -> None:
    model, src = tiny_model(), sources([5, 8, 3, 6])
    before = generate([model], src, SearchConfig(beam=beam, nbest=beam))
    assert any(repeats(h.tokens, 2) for row in before for h in row)  # random models babble
    after = generate([model], src, SearchConfig(beam=beam, nbest=beam, no_repeat_ngram=2))
    assert not any(repeats(h.tokens, 2) for row in after for h in row)


@pytest.mark.parametrize("beam", [1, 3])
def test_min_len_prevents_early_eos(beam: int) -> None:
    model = ScriptedModel({(): {EOS_ID: 0.9, A: 0.1}, (A,): {EOS_ID: 0.9, A: 0.1}})
    assert search(model, beam=beam)[0][0].tokens == [A]  # min_len 1 by default
    assert search(model, beam=beam, min_len=0)[0][0].tokens == []
    model = tiny_model()
    src = sources([2, 4])
    for row in generate([model], src, SearchConfig(beam=beam, nbest=beam, min_len=12)):
        assert all(len(h.tokens) >= 12 for h in row)


def unk_loving_model() -> Transformer:
    model = tiny_model()
    direction = torch.nn.functional.normalize(torch.randn(32), dim=0)
    with torch.no_grad():  # shift the decoder's output towards UNK's (tied) output embedding
        model.decoder[-1].ffn_res.norm.bias += 1.5 * direction
        model.tgt_embed.weight[UNK_ID] = 1.5 * direction
    return model


@pytest.mark.parametrize("beam", [1, 3])
def test_unk_penalty_changes_unk_scores(beam: int) -> None:
    model, src = unk_loving_model(), sources([4, 6])
    plain = generate([model], src, SearchConfig(beam=beam, nbest=beam))
    assert any(UNK_ID in h.tokens for row in plain for h in row)
    mild = generate([model], src, SearchConfig(beam=beam, nbest=beam, unk_penalty=0.25))
    for h in (h for row in mild for h in row):
        penalised = h.logprob - 0.25 * h.tokens.count(UNK_ID)
        assert h.score == pytest.approx(penalised / (len(h.tokens) + 1), abs=1e-5)
    harsh = generate([model], src, SearchConfig(beam=beam, nbest=beam, unk_penalty=100.0))
    assert not any(UNK_ID in h.tokens for row in harsh for h in row)


def test_sampling_is_reproducible_and_top_k_one_is_greedy() -> None:
    model, src = tiny_model(), sources([5, 9, 2])
    cfg = SearchConfig(beam=1, sampling=True, nbest=3, seed=7, temperature=1.5)
    first, again = generate([model], src, cfg), generate([model], src, cfg)
    same(first, again, tol=0.0)
    other = generate([model], src, dataclasses.replace(cfg, seed=8))
    assert [[h.tokens for h in r] for r in first] != [[h.tokens for h in r] for r in other]
    top1 = generate([model], src, dataclasses.replace(cfg, top_k=1, nbest=1))
    same(top1, generate([model], src, SearchConfig(beam=1)))


def test_sampling_respects_top_k() -> None:
    model = ScriptedModel({(): {A: 0.5, B: 0.3, 6: 0.2}})
    cfg = SearchConfig(beam=1, sampling=True, nbest=40, top_k=2)
    drawn = {tuple(h.tokens) for h in generate([model], ONE_SOURCE, cfg)[0]}
    assert drawn == {(A,), (B,)}


def test_ensemble_with_itself_equals_the_model_alone() -> None:
    model, src = tiny_model(), sources([5, 9, 2])
    cfg = SearchConfig(beam=4, nbest=2)
    same(generate([model, model], src, cfg), generate([model], src, cfg))


def test_ensemble_averages_log_probabilities() -> None:
    sure = ScriptedModel({(): {A: 0.9, B: 0.1}})
    unsure = ScriptedModel({(): {A: 0.2, B: 0.8}})
    (best,) = search_pair(sure, unsure)
    mean_a, mean_b = (math.log(0.9) + math.log(0.2)) / 2, (math.log(0.1) + math.log(0.8)) / 2
    assert best.tokens == [A]  # geometric mean 0.42 vs 0.28
    assert best.logprob == pytest.approx(mean_a - math.log(math.exp(mean_a) + math.exp(mean_b)))


def search_pair(a: nn.Module, b: nn.Module) -> list[Hypothesis]:
    return generate([a, b], ONE_SOURCE, SearchConfig(beam=1, lenpen=0.0))[0]


def test_ensemble_refuses_different_vocabularies() -> None:
    with pytest.raises(MtkitError, match="different target vocabularies"):
        generate([tiny_model(40), tiny_model(30)], sources([3]), SearchConfig())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(beam=2, nbest=3), "exceeds --beam"),
        (dict(sampling=True, beam=2), "takes no --beam"),
        (dict(lenpen_style="marian"), "--lenpen-style"),
        (dict(sampling=True, beam=1, temperature=0.0), "--temperature"),
        (dict(sampling=True, beam=1, top_p=0.0), "--top-p"),
    ],
)
def test_contradictory_options_are_refused(options: dict, message: str) -> None:
    with pytest.raises(MtkitError, match=message):
        generate([tiny_model()], sources([3]), SearchConfig(**options))


def test_generate_restores_training_mode_and_accepts_long_max_len() -> None:
    model = tiny_model(max_positions=24).train()
    out = generate([model], sources([3]), SearchConfig(beam=2, max_len_b=10_000))
    assert model.training and len(out[0][0].tokens) == 23  # capped by max_positions - 1


class Recording:
    """``model`` whose decoding state records decoder layer ``layer``'s cross-attention (what
    the native engine's word alignments use)."""

    def __init__(self, model: Transformer, layer: int) -> None:
        self._model, self.layer = model, layer

    def __getattr__(self, name: str):
        return getattr(self._model, name)

    def start_state(self, encoded, max_len: int):
        return self._model.start_state(encoded, max_len, self.layer)


@pytest.mark.parametrize("variant", variant_params())
def test_recorded_attention_equals_the_teacher_forced_pass(variant: dict) -> None:
    """Every hypothesis of greedy decoding, beam search (n-best, beams moving, sentences
    leaving) and constrained search carries the chosen layer's cross-attention of its own
    steps, equal to a teacher-forced pass over it; the tokens are those of a plain search."""
    from mtkit.decoding.constraints import Constraints

    model = tiny_model(**variant)
    src = sources([6, 3, 5, 2])
    searches = [SearchConfig(beam=1), SearchConfig(beam=3, nbest=2, lenpen=0.6)]
    for layer, search in itertools.product((0, 1), searches):
        recorded = generate([Recording(model, layer), model], src, search)
        same(recorded, generate([model, model], src, search))
        for row, hyps in zip(src, recorded, strict=True):
            for hyp in hyps:
                tgt = torch.tensor([[BOS_ID, *hyp.tokens]])
                forced = model.cross_attention(row[None], tgt, layer)[0]
                assert hyp.attention is not None and hyp.attention.shape == forced.shape
                torch.testing.assert_close(hyp.attention, forced, atol=1e-5, rtol=1e-5)
    phrases = [Constraints([[7, 8]]) for _ in range(len(src))]
    found = generate([Recording(model, 1)], src, SearchConfig(beam=2), phrases)
    for row, hyps in zip(src, found, strict=True):
        tgt = torch.tensor([[BOS_ID, *hyps[0].tokens]])
        torch.testing.assert_close(
            hyps[0].attention, model.cross_attention(row[None], tgt, 1)[0], atol=1e-5, rtol=1e-5
        )
    assert generate([model], src, searches[1])[0][0].attention is None
