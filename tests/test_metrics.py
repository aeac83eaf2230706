"""metrics: sacrebleu scores with signatures, option checks, and paired significance tests."""

import json
import os
import random

import pytest
from sacrebleu.metrics import BLEU, CHRF, TER

from mtkit.config import EvaluateConfig
from mtkit.errors import MtkitError
from mtkit.metrics import METRICS, normalize_metrics, paired_test, score

WORDS = "der die das ein eine Mann Frau Hund Katze läuft sitzt auf im Park Straße rot groß".split()


def corpus(n: int = 60, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))) + "." for _ in range(n)]


def corrupt(lines: list[str], rate: float, seed: int) -> list[str]:
    """Replace about ``rate`` of the words with a random word."""
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) if rng.random() < rate else w for w in line.split())
        for line in lines
    ]


REFS = corpus()
GOOD = corrupt(REFS, 0.1, seed=1)
BAD = corrupt(REFS, 0.6, seed=2)


@pytest.mark.parametrize(
    "metric, options, name, signature",
    [
        ("bleu", {}, "BLEU", "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:"),
        ("bleu", {"tokenize": "intl", "lowercase": True}, "BLEU", "case:lc|eff:no|tok:intl|"),
        ("bleu", {"tokenize": "none"}, "BLEU", "tok:none|"),
        ("bleu", {"tokenize": "char"}, "BLEU", "tok:char|"),
        ("bleu", {"tokenize": "zh"}, "BLEU", "tok:zh|"),
        ("chrf", {}, "chrF2", "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:"),
        ("chrf", {"lowercase": True}, "chrF2", "case:lc|eff:yes|nc:6|nw:0|"),
        ("chrf++", {}, "chrF2++", "nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:"),
        ("ter", {}, "TER", "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:"),
        ("ter", {"lowercase": True}, "TER", "case:lc|tok:tercom|"),  # TER ignores case anyway
    ],
)
def test_names_and_signatures(metric: str, options: dict, name: str, signature: str) -> None:
    (result,) = score(GOOD, [REFS], EvaluateConfig(metrics=[metric], **options))
    assert result.name == name
    assert signature in result.signature
    assert result.text.startswith(f"{name}|{result.signature} = {result.score:.1f}")
    json.dumps(result.to_dict())  # plain data only


def test_same_numbers_as_sacrebleu_library() -> None:
    refs = [REFS, corrupt(REFS, 0.3, seed=3)]
    config = EvaluateConfig(metrics=list(METRICS), width=2)
    results = {r.name: r for r in score(BAD, refs, config)}
    expected = {
        "BLEU": BLEU().corpus_score(BAD, refs),
        "chrF2": CHRF().corpus_score(BAD, refs),
        "chrF2++": CHRF(word_order=2).corpus_score(BAD, refs),
        "TER": TER().corpus_score(BAD, refs),
    }
    assert results.keys() == expected.keys()
    for name, want in expected.items():
        assert results[name].score == want.score
        assert "nrefs:2|" in results[name].signature
    bleu = results["BLEU"]
    assert bleu.details["counts"] == expected["BLEU"].counts
    assert bleu.details["sys_len"] == expected["BLEU"].sys_len
    assert bleu.text.endswith(bleu.details["verbose_score"])


@pytest.mark.parametrize(
    "hyps, refs, options, expected",
    [
        (["the cat sat ."], [["the cat sat ."]], {}, {"BLEU": 100, "chrF2": 100, "TER": 0}),
        (["THE CAT SAT ."], [["the cat sat ."]], {"lowercase": True}, {"BLEU": 100, "chrF2": 100}),
        (["a b c d e"], [["x y z w v"], ["a b c d e"]], {}, {"BLEU": 100, "TER": 0}),  # 2nd ref
        (["x y z"], [["a b c"]], {}, {"BLEU": 0, "chrF2": 0, "TER": 100}),
    ],
)
def test_known_values(hyps: list, refs: list, options: dict, expected: dict) -> None:
    results = {r.name: r.score for r in score(hyps, refs, EvaluateConfig(**options))}
    for name, value in expected.items():
        assert results[name] == pytest.approx(value)


@pytest.mark.parametrize(
    "names, expected",
    [
        (["bleu", "chrf", "ter"], ["bleu", "chrf", "ter"]),
        (["BLEU", " chrF++ ", "bleu"], ["bleu", "chrf++"]),
        (["ter", "", "chrf"], None),
        (["bleu", "meteor"], "unknown metric 'meteor'"),
        ([], "no metric given"),
    ],
)
def test_normalize_metrics(names: list[str], expected: list[str] | str | None) -> None:
    if expected is None:
        with pytest.raises(MtkitError, match="unknown metric ''"):
            normalize_metrics(names)
    elif isinstance(expected, str):
        with pytest.raises(MtkitError, match=f"^--metrics: {expected}"):
            normalize_metrics(names)
    else:
        assert normalize_metrics(names) == expected


def test_bad_tokenizer_names_the_option() -> None:
    with pytest.raises(MtkitError, match=r"^--tokenize: unknown BLEU tokenizer 'v14' \(.*13a"):
        score(GOOD, [REFS], EvaluateConfig(tokenize="v14"))


def test_unavailable_tokenizer() -> None:
    try:
        import MeCab  # noqa: F401
    except ImportError:
        with pytest.raises(MtkitError, match="^--tokenize ja-mecab: unavailable"):
            score(GOOD, [REFS], EvaluateConfig(metrics=["bleu"], tokenize="ja-mecab"))
    else:
        pytest.skip("MeCab is installed")


@pytest.mark.parametrize(
    "hyps, refs, message",
    [
        (["a", "b"], [["a"]], "line count mismatch: 2 hypotheses, 1 lines in reference 1"),
        (["a"], [["a"], ["a", "b"]], "2 lines in reference 2"),
        ([], [[]], "nothing to score"),
        (["a"], [], "no references"),
    ],
)
def test_corpus_checks(hyps: list, refs: list, message: str) -> None:
    with pytest.raises(MtkitError, match=message):
        score(hyps, refs, EvaluateConfig())


# --- paired tests ---------------------------------------------------------------------------

FAST = {"paired_bs_n": 200, "paired_ar_n": 300}


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_paired_identical_good_and_bad(test: str) -> None:
    config = EvaluateConfig(metrics=["bleu", "chrf", "ter"], paired=test, **FAST)
    systems = [("base", GOOD), ("copy", list(GOOD)), ("bad", BAD)]
    results = paired_test(systems, [REFS], config)
    assert [r.name for r in results] == ["BLEU", "chrF2", "TER"]
    for result in results:
        base, copy, bad = result.systems
        assert [s.system for s in result.systems] == ["base", "copy", "bad"]
        assert base.p_value is None and not base.significant
        assert copy.p_value == 1.0 and not copy.significant  # identical outputs never differ
        assert copy.score == base.score
        assert 0.0 <= bad.p_value < 0.05 and bad.significant  # a much worse system
        for system in result.systems:
            assert isinstance(system.mean, float) and isinstance(system.ci, float)
            assert system.ci >= 0
        n = FAST["paired_bs_n"] if test == "bs" else FAST["paired_ar_n"]
        assert f"|{test}:{n}|" in f"|{result.signature}|"
        assert "seed:12345" in result.signature
        json.dumps(result.to_dict())
    assert "(p = 1.0000)" in results[0].format(1)
    assert results[0].format(1).splitlines()[1].lstrip().startswith("Baseline: base")


def test_paired_scores_match_plain_scores_and_p_in_range() -> None:
    close = corrupt(GOOD, 0.05, seed=4)
    config = EvaluateConfig(metrics=["bleu", "chrf++"], **FAST)
    results = paired_test([("a", GOOD), ("b", close)], [REFS], config)
    plain = {r.name: r.score for r in score(close, [REFS], config)}
    for result in results:
        assert result.systems[1].score == plain[result.name]
        assert 0.0 < result.systems[1].p_value <= 1.0


def test_paired_is_seeded_and_leaves_environment_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SACREBLEU_SEED", raising=False)
    systems = [("a", GOOD), ("b", corrupt(GOOD, 0.1, seed=5))]
    config = EvaluateConfig(metrics=["bleu"], **FAST)
    first = paired_test(systems, [REFS], config)
    assert "SACREBLEU_SEED" not in os.environ
    assert paired_test(systems, [REFS], config) == first
    other = paired_test(systems, [REFS], EvaluateConfig(metrics=["bleu"], seed=7, **FAST))
    assert "seed:7" in other[0].signature
    assert other[0].systems[1].mean != first[0].systems[1].mean


@pytest.mark.parametrize(
    "options, n_systems, message",
    [
        ({"paired": "xx"}, 2, "--paired: unknown test 'xx'"),
        ({"seed": 0}, 2, "--seed must be a positive integer"),
        ({"paired_bs_n": 0}, 2, "must be positive"),
        ({}, 1, "needs a baseline and at least one other system"),
    ],
)
def test_paired_checks(options: dict, n_systems: int, message: str) -> None:
    systems = [("a", GOOD), ("b", BAD)][:n_systems]
    with pytest.raises(MtkitError, match=message):
        paired_test(systems, [REFS], EvaluateConfig(**options))
