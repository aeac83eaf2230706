"""Speculative greedy decoding equals greedy decoding, token for token, on tiny random models.

Tokens are compared exactly; scores and log-probabilities to 1e-5 (a pass over several
positions sums in another order than single steps). A near-tie flipped by float rounding would
fail these tests loudly, never pass silently.
"""

import copy

import pytest
import torch
from search_helpers import same, sources, tiny_model
from variants import variant_params

from mtkit.config import SearchConfig
from mtkit.data.shortlist import Shortlist
from mtkit.data.tokenizer import EOS_ID, PAD_ID
from mtkit.decoding import Hypothesis, generate
from mtkit.decoding.speculative import Draft, DraftStats
from mtkit.errors import MtkitError
from mtkit.model.inference import prepare_for_inference
from mtkit.model.shortlisted import ShortlistedDraft, projection_weight
from mtkit.model.transformer import Transformer

pytestmark = pytest.mark.usefixtures("one_thread")

LENGTHS = [5, 9, 2, 7, 1, 12, 4, 6]


def eos_prone(**variant) -> Transformer:
    """A tiny model whose EOS is likely enough that sentences end before their length limit."""
    model = tiny_model(output_bias=True, **variant)
    model.output_bias[EOS_ID] = 3.5
    return model


def noisy(model: Transformer, std: float = 0.03, seed: int = 7) -> Transformer:
    """A copy of ``model`` with perturbed weights: a draft that agrees often, not always."""
    out = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in out.parameters():
            p.add_(torch.randn(p.shape, generator=g) * std)
    return out


def draft_of(kind: str, teacher: Transformer) -> Transformer:
    if kind == "itself":
        return teacher
    if kind == "noisy":
        return noisy(teacher)
    return tiny_model(seed=5, layers=1, output_bias=True)  # unrelated: mostly rejected


def check_equal(spec: list[list[Hypothesis]], greedy: list[list[Hypothesis]]) -> None:
    same(spec, greedy)
    for a, b in zip(spec, greedy, strict=True):
        assert a[0].token_logprobs == pytest.approx(b[0].token_logprobs, abs=1e-5)


def test_sentences_end_early_and_at_their_limit() -> None:
    """The fixture exercises both ends: EOS chosen, and EOS forced by the length limit."""
    found = generate([eos_prone()], sources(LENGTHS), SearchConfig(beam=1))
    lengths = [len(h[0].tokens) for h in found]
    limits = [int(1.2 * n + 10) for n in LENGTHS]
    assert any(n < limit for n, limit in zip(lengths, limits, strict=True))
    assert any(n == limit for n, limit in zip(lengths, limits, strict=True))


@pytest.mark.parametrize("variant", variant_params())
def test_every_variant_equals_greedy_in_a_batch_and_alone(variant: dict) -> None:
    teacher, src = eos_prone(**variant), sources(LENGTHS)
    cfg = SearchConfig(beam=1)
    greedy = generate([teacher], src, cfg)
    draft = Draft(noisy(teacher), tokens=3, stats=DraftStats())
    check_equal(generate([teacher], src, cfg, draft=draft), greedy)
    alone = [generate([teacher], row[row.ne(PAD_ID)][None], cfg, draft=draft)[0] for row in src]
    check_equal(alone, greedy)
    assert 0 < draft.stats.accepted < draft.stats.proposed


RULES = [
    dict(),
    dict(max_len_a=0.0, max_len_b=4),  # the length limit ends most sentences
    dict(min_len=6, unk_penalty=0.7),
    dict(no_repeat_ngram=2, lenpen=0.6, lenpen_style="gnmt"),
    dict(no_repeat_ngram=1, min_len=2, max_len_a=0.5, max_len_b=3),
]


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("kind", ["itself", "noisy", "unrelated"])
@pytest.mark.parametrize("k", [1, 4, 8])
def test_search_rules_and_drafts_give_greedy_output(rules: dict, kind: str, k: int) -> None:
    teacher = eos_prone()
    src = sources([3, 11, 1, 7, 7, 5, 2, 9, 4, 6, 8, 10, 13, 2, 5, 3], seed=4)
    cfg = SearchConfig(beam=1, **rules)
    greedy = generate([teacher], src, cfg)
    check_equal(generate([teacher], src, cfg, draft=Draft(draft_of(kind, teacher), k)), greedy)


def test_an_ensemble_of_teachers_decodes_as_its_greedy_search() -> None:
    teachers, src = [eos_prone(), eos_prone(seed=2)], sources(LENGTHS)
    for cfg in (SearchConfig(beam=1), SearchConfig(beam=1, no_repeat_ngram=2, min_len=3)):
        greedy = generate(teachers, src, cfg)
        check_equal(generate(teachers, src, cfg, draft=Draft(noisy(teachers[0]), 4)), greedy)


def test_a_perfect_draft_is_always_accepted_and_saves_passes() -> None:
    teacher, src = eos_prone(), sources([9])
    stats = DraftStats()
    (hyps,) = generate([teacher], src, SearchConfig(beam=1), draft=Draft(teacher, 4, stats))
    assert stats.acceptance == 1.0
    assert stats.tokens == len(hyps[0].tokens) + 1  # EOS included
    assert stats.passes == -(-stats.tokens // 5)  # 5 tokens per pass, the last one fewer


def test_searches_other_than_greedy_ignore_the_draft() -> None:
    teacher, src = eos_prone(), sources(LENGTHS)
    draft = Draft(noisy(teacher), 4, DraftStats())
    for cfg in (SearchConfig(beam=3), SearchConfig(sampling=True, nbest=2)):
        same(generate([teacher], src, cfg, draft=draft), generate([teacher], src, cfg))
    assert draft.stats.passes == 0


@pytest.mark.parametrize(
    ("draft", "message"),
    [
        (lambda: tiny_model(vocab=41), "draft model's target vocabulary"),
        (lambda: tiny_model(max_positions=64), "draft model's max_positions"),
    ],
)
def test_unfit_drafts_are_refused(draft, message: str) -> None:
    with pytest.raises(MtkitError, match=message):
        generate([tiny_model()], sources([4]), SearchConfig(beam=1), draft=Draft(draft()))
    with pytest.raises(MtkitError, match="--draft-tokens must be at least 1"):
        Draft(tiny_model(), 0)


def vocabulary_shortlist(frequent: tuple[int, ...], vocab: int = 40, top_k: int = 2) -> Shortlist:
    """Per source id s the targets 6 + (7 s + i) mod 12, i < top_k (16 ids at most with the
    special ids; not 5, the tiny models' favourite), and ``frequent``."""
    rows = tuple(tuple(sorted({6 + (7 * s + i) % 12 for i in range(top_k)})) for s in range(vocab))
    return Shortlist(rows, frequent, "a" * 64, "b" * 64, vocab, vocab, "test", top_k)


PREPARED = {"plain": ("", "default"), "packed": ("", "onednn"), "int8": ("int8", "onednn")}


@pytest.mark.parametrize("prepared", list(PREPARED))
def test_a_shortlisted_draft_reads_the_full_logits_at_its_columns(prepared: str) -> None:
    base, src = noisy(eos_prone()), sources(LENGTHS)
    quantize, matmul = PREPARED[prepared]
    model = prepare_for_inference(
        copy.deepcopy(base), torch.device("cpu"), "fp32", quantize, matmul
    )
    draft = ShortlistedDraft(
        model, vocabulary_shortlist((20, 29)), base.special_ids, projection_weight(base)
    )
    tokens = torch.randint(4, 40, (len(LENGTHS), 3), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        full = model.decode_steps(tokens, model.start_state(model.encode(src), 8))
        restricted = draft.decode_steps(tokens, draft.start_state(draft.encode(src), 8))
    allowed = vocabulary_shortlist((20, 29)).union(src.tolist(), range(4))
    assert draft.columns.tolist() == allowed.tolist()
    assert 4 < len(allowed) < 40
    torch.testing.assert_close(restricted, full[..., draft.columns], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("prepared", list(PREPARED))
def test_int8_and_shortlisted_drafts_give_greedy_output(prepared: str) -> None:
    """The draft guesses within a small shortlist, or the whole vocabulary as one (then it
    proposes exactly what the unrestricted draft proposes), int8 or not: greedy's output."""
    teacher, src = eos_prone(), sources(LENGTHS)
    cfg = SearchConfig(beam=1)
    greedy = generate([teacher], src, cfg)
    base = noisy(teacher)
    quantize, matmul = PREPARED[prepared]
    model = prepare_for_inference(
        copy.deepcopy(base), torch.device("cpu"), "fp32", quantize, matmul
    )
    stats = {}
    for name, frequent in (("none", None), ("full", tuple(range(40))), ("small", (20, 29))):
        draft = model
        if frequent is not None:
            draft = ShortlistedDraft(
                model, vocabulary_shortlist(frequent), teacher.special_ids, projection_weight(base)
            )
        stats[name] = DraftStats()
        check_equal(generate([teacher], src, cfg, draft=Draft(draft, 3, stats[name])), greedy)
        if name == "small":  # alone, each sentence has a union of its own
            alone = [
                generate([teacher], row[row.ne(PAD_ID)][None], cfg, draft=Draft(draft, 3))[0]
                for row in src
            ]
            check_equal(alone, greedy)
    assert stats["full"] == stats["none"]
    assert stats["small"].acceptance < stats["none"].acceptance


@pytest.mark.parametrize("confidence", [0.3, 0.9, 0.999])
def test_a_confidence_threshold_proposes_less_and_gives_greedy_output(confidence: float) -> None:
    teacher, src = eos_prone(), sources(LENGTHS)
    for cfg in (SearchConfig(beam=1), SearchConfig(beam=1, no_repeat_ngram=2, min_len=3)):
        greedy = generate([teacher], src, cfg)
        always, gated = DraftStats(), DraftStats()
        draft = noisy(teacher, std=0.3)
        check_equal(generate([teacher], src, cfg, draft=Draft(draft, 6, always)), greedy)
        check_equal(generate([teacher], src, cfg, draft=Draft(draft, 6, gated, confidence)), greedy)
        if cfg.no_repeat_ngram:  # alone too, once
            one = Draft(draft, 6, confidence=confidence)
            alone = [
                generate([teacher], row[row.ne(PAD_ID)][None], cfg, draft=one)[0] for row in src
            ]
            check_equal(alone, greedy)
        assert gated.proposed < always.proposed
        assert gated.proposed / gated.row_passes < 6


def test_a_confidence_threshold_never_met_proposes_one_token_a_pass() -> None:
    teacher, src = eos_prone(), sources([9])
    stats = DraftStats()
    uniform = tiny_model(seed=5, layers=1)
    with torch.no_grad():
        for p in uniform.parameters():
            p.zero_()  # equal logits: every proposal has probability 1 / V
    generate([teacher], src, SearchConfig(beam=1), draft=Draft(uniform, 4, stats, 0.5))
    # one proposal per pass (none counted in the last, which ends the row: it gives EOS)
    assert stats.proposed == stats.passes - 1 and stats.passes > 10
    always = DraftStats()
    generate([teacher], src, SearchConfig(beam=1), draft=Draft(uniform, 4, always))
    assert always.proposed > 3 * always.passes
    with pytest.raises(MtkitError, match="--draft-confidence must be in"):
        Draft(teacher, 4, confidence=1.0)
