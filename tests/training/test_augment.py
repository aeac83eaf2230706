"""Training-time augmentation: which pairs change and how, exactly, and what a run does with it."""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
import torch
from subprocess_helpers import assert_same_run, run_mtkit
from training_helpers import train_args

from mtkit.checkpoint import load_checkpoint, load_for_inference
from mtkit.config import AugmentConfig, SearchConfig, TrainConfig, augment_spec, from_dict
from mtkit.data import augment as modify
from mtkit.data.binarized import ParallelData, load_tokenizers
from mtkit.data.tokenizer import EOS_ID, PAD_ID
from mtkit.training.augment import Augmenter, Change, plan_changes

ALL = AugmentConfig(**augment_spec("default"))


def test_plan_is_a_function_of_seed_and_epoch() -> None:
    plan = plan_changes(5000, ALL, seed=3, epoch=2)
    assert plan == plan_changes(5000, ALL, seed=3, epoch=2)
    assert plan != plan_changes(5000, ALL, seed=3, epoch=3)
    assert plan != plan_changes(5000, ALL, seed=4, epoch=2)
    assert plan_changes(5000, AugmentConfig(), seed=3, epoch=2) == []


def test_plan_draws_each_modifier_at_its_rate() -> None:
    n = 40_000
    rates = dict(uppercase=0.1, titlecase=0.05, lowercase=0.15, typos=0.2, merge=0.1, noise=0.02)
    config = AugmentConfig(**rates)
    plan = plan_changes(n, config, seed=1, epoch=1)
    noise = [c for c in plan if c.noise]
    kept = n - len(noise)  # noise replaces everything else
    assert all(c == Change(c.index, noise=True) for c in noise)
    counts = {
        "noise": (len(noise), n * 0.02),
        "uppercase": (sum(c.case == "uppercase" for c in plan), kept * 0.1),
        "titlecase": (sum(c.case == "titlecase" for c in plan), kept * 0.05),
        "lowercase": (sum(c.case == "lowercase" for c in plan), kept * 0.15),
        "typos": (sum(c.typos for c in plan), kept * 0.2),
        "merge": (sum(c.merged > 1 for c in plan), kept * 0.1),
    }
    for name, (found, expected) in counts.items():
        assert abs(found - expected) < 5 * expected**0.5, name
    merges = [c for c in plan if c.merged > 1]
    assert {c.merged for c in merges} == {2, 3, 4}
    assert 0.4 < sum(c.strip for c in merges) / len(merges) < 0.6
    assert not any(c.strip for c in plan if c.merged == 1)


def test_merges_stay_inside_their_direction() -> None:
    ranges = [(0, 7), (7, 15), (15, 20)]
    plan = plan_changes(20, AugmentConfig(merge=1.0), seed=1, epoch=1, ranges=ranges)
    for change in plan:
        (stop,) = [b for a, b in ranges if a <= change.index < b]
        assert change.index + change.merged <= stop
    assert {c.index for c in plan} == set(range(20)) - {6, 14, 19}  # a direction's last pair


def decoded(tokenizer, ids) -> str:
    return tokenizer.decode([ids])[0]


@pytest.mark.parametrize("case", ["uppercase", "titlecase", "lowercase"])
def test_epoch_pairs_are_the_modified_text_encoded_again(tiny_dataset: Path, case: str) -> None:
    data = ParallelData(tiny_dataset, "train")
    src_tok, tgt_tok = load_tokenizers(tiny_dataset)
    augmenter = Augmenter(data, (src_tok, tgt_tok), AugmentConfig(**{case: 1.0}), 1, 10_000)
    split = augmenter.epoch(1)
    assert sorted(split.replaced) == list(range(len(data)))
    change = getattr(modify, case)
    for i in range(len(data)):
        src, tgt = (
            decoded(t, ids) for t, ids in zip((src_tok, tgt_tok), data.pair(i), strict=True)
        )
        new_src, new_tgt = split.pair(i)
        assert new_src.tolist() == src_tok.encode_one(change(src))
        assert new_tgt.tolist() == tgt_tok.encode_one(tgt if case == "lowercase" else change(tgt))
        assert (split.src_lengths[i], split.tgt_lengths[i]) == (len(new_src), len(new_tgt))


def test_too_long_pairs_keep_their_form(tiny_dataset: Path) -> None:
    data = ParallelData(tiny_dataset, "train")
    augmenter = Augmenter(data, load_tokenizers(tiny_dataset), AugmentConfig(merge=1.0), 1, 12)
    split = augmenter.epoch(1)
    for i in range(len(data)):
        src, tgt = split.pair(i)
        if i in split.replaced:
            assert len(src) <= 12 and len(tgt) <= 12
            assert len(src) > len(data.pair(i)[0])  # merged
        else:
            assert [a.tolist() for a in split.pair(i)] == [a.tolist() for a in data.pair(i)]
    assert 0 < len(split.replaced) < len(data)


def test_a_multilingual_source_keeps_its_tag(multi_dataset: Path) -> None:
    data = ParallelData(multi_dataset, "train")
    src_tok, tgt_tok = load_tokenizers(multi_dataset)
    config = AugmentConfig(uppercase=0.5, merge=0.5, typos=0.5)
    split = Augmenter(data, (src_tok, tgt_tok), config, 1, 10_000).epoch(1)
    assert len(split.replaced) > len(data) // 2
    for i, (src, _) in split.replaced.items():
        assert src[0] == data.pair(i)[0][0] and int(src[0]) in src_tok.tag_ids
        assert int(src[0]) not in src[1:].tolist()  # a merge carries one tag


def test_augmented_runs_are_deterministic_and_differ_from_plain(
    tmp_path: Path, tiny_dataset: Path, mtkit
) -> None:
    options = ["--max-tokens", "512", "--max-updates", "6", "--augment", "default"]
    for name in ("a", "b"):
        result = mtkit(*train_args(tiny_dataset, tmp_path / name, *options))
        assert result.exit_code == 0, result.output
    assert_same_run(tmp_path / "a", tmp_path / "b")
    plain = mtkit(*train_args(tiny_dataset, tmp_path / "plain", *options[:-2]))
    assert plain.exit_code == 0, plain.output
    a = load_checkpoint(tmp_path / "a" / "checkpoint_last.pt")["model"]
    b = load_checkpoint(tmp_path / "plain" / "checkpoint_last.pt")["model"]
    assert any(not torch.equal(a[k], b[k]) for k in a)
    saved = load_checkpoint(tmp_path / "a" / "checkpoint_last.pt")["train_config"]["augment"]
    assert saved == {**augment_spec("default"), "typo_rate": 0.15}


def test_sigkill_and_resume_with_augmentation_is_bitwise_identical(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    augment = "uppercase=0.2,titlecase=0.2,typos=0.3,merge=0.3,noise=0.05"
    options = ["--max-tokens", "512", "--max-updates", "14", "--save-every", "4"]
    options += ["--augment", augment, "--set", "log_every=1"]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    done = run_mtkit(train_args(tiny_dataset, straight, *options))
    assert done.returncode == 0, done.stderr
    env = {"MTKIT_TEST_KILL_AT_UPDATE": "6"}
    crash = run_mtkit(train_args(tiny_dataset, killed, *options), env=env, slow=True)
    assert crash.returncode == -signal.SIGKILL
    resumed = run_mtkit(train_args(tiny_dataset, killed, *options))
    assert resumed.returncode == 0, resumed.stderr
    a, _ = assert_same_run(straight, killed)
    assert a["state"]["epoch"] >= 2  # the resumed run rebuilt an augmented epoch


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--augment", "capitals=0.1"], "--augment 'capitals=0.1': expected default, none"),
        (["--augment", "typos=lots"], "typos must be a number"),
        (["--set", "augment.uppercase=2"], "augment.uppercase must be in [0, 1], got 2.0"),
        (["--augment", "uppercase=0.6,lowercase=0.6"], "titlecase + lowercase must be <= 1"),
        (["--set", "augment.typo_rate=0"], "augment.typo_rate must be in (0, 1]"),
        (["--set", "augment.loud=1"], "unknown option 'loud'"),
    ],
)
def test_bad_augment_options_are_one_line_errors(
    tmp_path: Path, tiny_dataset: Path, mtkit, args: list[str], message: str
) -> None:
    result = mtkit(*train_args(tiny_dataset, tmp_path / "run", "--max-updates", "1", *args))
    assert result.exit_code != 0 and message in result.output, result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output


def test_yaml_section_set_and_resume(tmp_path: Path, tiny_dataset: Path, mtkit) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("augment:\n  uppercase: 0.1\n  merge: 0.2\n")
    run = tmp_path / "run"
    args = ["--config", str(config), "--set", "augment.typos=0.3", "--max-updates", "2"]
    assert mtkit(*train_args(tiny_dataset, run, *args)).exit_code == 0
    saved = from_dict(TrainConfig, load_checkpoint(run / "checkpoint_last.pt")["train_config"])
    assert saved.augment == AugmentConfig(uppercase=0.1, merge=0.2, typos=0.3)
    changed = mtkit(*train_args(tiny_dataset, run, "--max-updates", "3", "--augment", "none"))
    assert changed.exit_code == 1 and "augment" in changed.output, changed.output
    same = mtkit("train", "--run-dir", str(run), "--max-updates", "3", "-q")
    assert same.exit_code == 0, same.output


def test_uppercase_augmentation_teaches_upper_case_input(
    tmp_path: Path, tiny_word_pairs, make_tiny_dataset, mtkit
) -> None:
    """A tiny model trained 300 updates with UPPERCASE pairs translates uppercased sentences
    far better (case-insensitive BLEU) than the same model trained without them."""
    pairs = tiny_word_pairs(300, seed=11, min_words=2, max_words=5)
    held_out = tiny_word_pairs(40, seed=12, min_words=2, max_words=5)
    upper = [modify.uppercase(s) for p in pairs for s in p]  # the vocabulary knows capitals
    data = make_tiny_dataset("data", pairs, held_out, vocab_size=120, spm_extra=upper)
    options = ["--max-tokens", "512", "--lr", "5e-3", "--warmup-updates", "20"]
    options += ["--max-updates", "300", "--label-smoothing", "0", "--set", "model.dropout=0"]
    options += ["--set", "model.d_model=64", "--set", "model.ffn_dim=128"]
    scores = {}
    for name, augment in (("plain", "none"), ("upper", "uppercase=0.3")):
        run = tmp_path / name
        result = mtkit(*train_args(data, run, *options, "--augment", augment))
        assert result.exit_code == 0, result.output
        loaded = load_for_inference(run / "checkpoint_last.pt")
        sources = [modify.uppercase(s) for s, _ in held_out]
        ids = [torch.tensor([*loaded.src_tokenizer.encode_one(s), EOS_ID]) for s in sources]
        batch = torch.nn.utils.rnn.pad_sequence(ids, batch_first=True, padding_value=PAD_ID)
        from mtkit.decoding.search import generate

        hyps = generate([loaded.model], batch, SearchConfig(beam=1))
        out = loaded.tgt_tokenizer.decode([h[0].tokens for h in hyps])
        refs = [t for _, t in held_out]
        scores[name] = sacrebleu.corpus_bleu(out, [refs], lowercase=True).score
    assert scores["upper"] > 40 and scores["upper"] > scores["plain"] + 30, scores


def test_augmented_split_reads_like_the_base(tiny_dataset: Path) -> None:
    data = ParallelData(tiny_dataset, "train")
    split = Augmenter(data, load_tokenizers(tiny_dataset), AugmentConfig(), 1, 100).epoch(1)
    assert split.replaced == {} and len(split) == len(data)
    assert np.array_equal(split.src_lengths, data.src_lengths)
    assert split.directions == data.directions
