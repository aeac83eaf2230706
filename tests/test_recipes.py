"""Every recipe target runs offline, end to end, on tiny stand-in data with a tiny model."""

from __future__ import annotations

import gzip
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORDS = {
    "en": "a man woman dog child runs walks plays in on the red blue street park ball".split(),
    "de": (
        "ein mann frau hund kind läuft geht spielt im auf der rote blaue straße park ball".split()
    ),
    "fr": (
        "un homme femme chien enfant court marche joue dans sur le rouge bleu rue parc balle"
    ).split(),
    "cs": "jeden muž žena pes dítě běží jde hraje v na ten červený modrý ulice park míč".split(),
}
TINY_CONFIG = """\
preset: transformer-small
max_updates: 4
max_tokens: 512
save_every: 2
keep_last: 3
validate_every: 2
valid_max_sentences: 5
warmup_updates: 2
model: {d_model: 16, ffn_dim: 32, heads: 2, encoder_layers: 1, decoder_layers: 1}
"""


def pairs(n: int, seed: int, tgt: str = "de") -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        idx = [rng.randrange(len(WORDS["en"])) for _ in range(rng.randint(3, 8))]
        out.append((" ".join(WORDS["en"][i] for i in idx), " ".join(WORDS[tgt][i] for i in idx)))
    return out


def make(makefile: Path, targets: list[str], **variables: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    args = [f"{k}={v}" for k, v in variables.items()]
    cmd = ["make", "--no-print-directory", "-f", str(makefile), *targets, *args]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


MTKIT = f"{sys.executable} -m mtkit"
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def test_multi30k_recipe_every_target(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split, n, seed in (("train", 300, 1), ("val", 12, 2), ("test_2016_flickr", 10, 3)):
        data = pairs(n, seed)
        for k, lang in enumerate(("en", "de")):
            text = "".join(p[k] + "\n" for p in data)
            (corpus / f"{split}.{lang}.gz").write_bytes(gzip.compress(text.encode()))
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_CONFIG)
    recipe = ROOT / "recipes" / "multi30k" / "Makefile"
    common = dict(
        MTKIT=MTKIT,
        CORPUS=str(corpus),
        WORK=str(tmp_path / "work"),
        VOCAB="60",
        CONFIG=str(config),
        DEMO_CONFIG=str(config),
        AVG="2",
        BEAM="2",
    )
    make(recipe, ["spm", "prepare", "train", "average", "evaluate", "plot"], **common)
    exp = tmp_path / "work" / "en-de"
    assert len((exp / "test_2016_flickr.hyp.de").read_text().splitlines()) == 10
    assert (exp / "run" / "checkpoint_avg.pt").is_file()
    assert (exp / "curve.png").read_bytes()[:4] == b"\x89PNG"
    demo = make(recipe, ["demo"], **common)
    assert "BLEU|nrefs:1" in demo.stdout and "chrF2|nrefs:1" in demo.stdout
    assert "echo 'A little girl is playing with a red ball.' |" in demo.stdout
    # the example is in the source language of the direction run (what make would run: the
    # demo's path itself ran above)
    demo_de = make(recipe, ["--dry-run", "demo"], **common, SRC="de", TGT="en")
    assert "echo 'Ein kleines Mädchen spielt mit einem roten Ball.' |" in demo_de.stdout
    # the other direction (what make would run: en-de's commands ran above), a checkpoint named
    work = tmp_path / "work"
    last = work / "de-en" / "run" / "checkpoint_last.pt"
    reverse = make(recipe, ["--dry-run", "all"], **common, SRC="de", TGT="en", CKPT=str(last))
    assert f"prepare --src-lang de --tgt-lang en --spm {work}/spm.model" in reverse.stdout
    assert f"--run-dir {work}/de-en/run" in reverse.stdout
    hyp = f"{work}/de-en/test_2016_flickr.hyp.en"
    assert f"translate -m {last} -i {work}/raw/test_2016_flickr.de -o {hyp}" in reverse.stdout
    assert f"evaluate -i {hyp} -r {work}/raw/test_2016_flickr.en" in reverse.stdout


def test_multi30k_multi_recipe_every_target(tmp_path: Path) -> None:
    """en -> {de, fr, cs}: one tagged model (all) and the bilingual comparison (compare)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split, n, seed in (("train", 200, 1), ("val", 8, 2), ("test_2016_flickr", 6, 3)):
        for tgt in ("de", "fr", "cs"):
            data = pairs(n, seed, tgt)  # the same English side for every target
            for lang, side in (("en", 0), (tgt, 1)):
                text = "".join(p[side] + "\n" for p in data)
                (corpus / f"{split}.{lang}.gz").write_bytes(gzip.compress(text.encode()))
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_CONFIG)
    recipe = ROOT / "recipes" / "multi30k-multi" / "Makefile"
    common = dict(
        MTKIT=MTKIT,
        CORPUS=str(corpus),
        WORK=str(tmp_path / "work"),
        VOCAB="80",
        CONFIG=str(config),
        COMPARE_CONFIG=str(config),
        AVG="2",
        BEAM="2",
        UPDATES="2",
    )
    out = make(recipe, ["all"], **common).stdout
    for tgt in ("de", "fr", "cs"):
        assert f"en-{tgt}:" in out
        hyp = tmp_path / "work" / "multi" / f"test_2016_flickr.hyp.{tgt}"
        assert len(hyp.read_text().splitlines()) == 6
    assert out.count("BLEU|nrefs:1") == 3 and out.count("chrF2|nrefs:1") == 3
    # the comparison, over two of the targets (each bilingual model is five CLI calls)
    compare = make(recipe, ["compare"], **common, TGTS="de cs").stdout
    assert compare.count("BLEU|nrefs:1") == 4  # two bilingual models, two directions
    for tgt in ("de", "cs"):
        assert f"bilingual en-{tgt}:" in compare
    import torch

    multi = torch.load(
        tmp_path / "work" / "multi" / "compare-run" / "checkpoint_last.pt",
        weights_only=True,
        map_location="cpu",
    )
    assert multi["update"] == 4  # UPDATES x 2 directions


@pytest.mark.parametrize("recipe, src, tgt", [("wmt14-en-de", "en", "de")])
def test_wmt_recipe_every_target_offline(tmp_path: Path, recipe: str, src: str, tgt: str) -> None:
    pytest.importorskip("datasets")
    import datasets

    def save(data: list[tuple[str, str]], path: Path) -> None:
        rows = [{"translation": {src: s, tgt: t}} for s, t in data]
        datasets.Dataset.from_list(rows).to_parquet(str(path))

    save(pairs(300, 1), tmp_path / "train.parquet")
    save(pairs(12, 2), tmp_path / "valid.parquet")
    test = pairs(10, 3)
    (tmp_path / f"test.{src}").write_text("".join(s + "\n" for s, _ in test))
    (tmp_path / f"test.{tgt}").write_text("".join(t + "\n" for _, t in test))
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_CONFIG)
    makefile = ROOT / "recipes" / recipe / "Makefile"
    result = make(
        makefile,
        ["spm", "prepare", "testset", "train", "average", "evaluate"],
        MTKIT=MTKIT,
        WORK=str(tmp_path / "work"),
        TRAIN=str(tmp_path / "train.parquet"),
        VALID=str(tmp_path / "valid.parquet"),
        TEST_SRC=str(tmp_path / f"test.{src}"),
        TEST_REF=str(tmp_path / f"test.{tgt}"),
        VOCAB="60",
        SPM_SAMPLE="1000",
        CONFIG=str(config),
        AVG="2",
        GPUS="0",
    )
    assert "BLEU|nrefs:1" in result.stdout and "TER|nrefs:1" in result.stdout
    hyp = tmp_path / "work" / f"{src}-{tgt}" / f"test.hyp.{tgt}"
    assert len(hyp.read_text().splitlines()) == 10


def test_the_wmt16_recipe_is_the_wmt14_one_for_romanian(tmp_path: Path) -> None:
    """wmt16-en-ro sets wmt.mk's variables as wmt14-en-de does (whose targets ran above): what
    make would run names Romanian, WMT16's data and test set throughout."""
    work = tmp_path / "work"
    targets = ["spm", "prepare", "testset", "train", "average", "evaluate"]
    out = make(
        ROOT / "recipes/wmt16-en-ro/Makefile", ["--dry-run", *targets], WORK=str(work)
    ).stdout
    assert "spm train --train wmt/wmt16 --hf-config ro-en --src-lang en --tgt-lang ro" in out
    assert "--train wmt/wmt16 --valid wmt/wmt16 --hf-config ro-en" in out
    assert f"prepare --src-lang en --tgt-lang ro --spm {work}/spm.model" in out
    assert "sacrebleu -t wmt16 -l en-ro --echo ref" in out
    config = ROOT / "recipes/wmt16-en-ro/config-base.yaml"
    assert f"train --config {config} --data {work}/en-ro/data" in out
    assert f"-o {work}/en-ro/test.hyp.ro" in out and f"-r {work}/test.ro" in out


@pytest.mark.parametrize(
    "config", sorted(ROOT.glob("recipes/*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_shipped_configs_resolve(config: Path) -> None:
    from mtkit.config import TrainConfig
    from mtkit.pipeline.train_config import (
        check_train_config,
        model_config,
        read_settings,
        train_config,
    )

    settings = read_settings(str(config), {"data": "data-bin"}, [])
    cfg = train_config(settings, TrainConfig())
    check_train_config(cfg)
    model = model_config(settings, cfg, (8000, 8000), joint=True)
    assert model.src_vocab_size == 8000 and model.share_all_embeddings
    for key, value in settings.yaml_model.items():
        assert getattr(model, key) == value, key
    assert cfg.max_updates or cfg.max_epochs or cfg.max_time  # every recipe stops on its own


def test_multi30k_student_targets_chain_teacher_distill_student_compare(tmp_path: Path) -> None:
    """`make student` (dry run): the recipe's teacher, or a given ensemble, translates train.en
    with beam 5 through the resumable `mtkit distill`; the student trains on that with
    student.yaml; teacher (beam 5) and student (greedy, fp32 and int8) are scored side by side.
    The commands run for real in tests/pipeline/test_distill.py (mtkit distill) and above."""
    recipe = ROOT / "recipes" / "multi30k" / "Makefile"
    work = tmp_path / "work"
    common = dict(MTKIT="mtkit", WORK=str(work), DISTILL_LINES="500")
    out = make(recipe, ["-n", "student"], **common).stdout
    exp = f"{work}/en-de"
    expected = [
        f"mtkit train --config {ROOT}/recipes/multi30k/config.yaml --data {exp}/data "
        f"--run-dir {exp}/teacher --preset transformer-small-modern",
        f"head -n 500 {work}/raw/train.en > {exp}/distill/train.en.tmp",
        f"mtkit distill -m {exp}/teacher/checkpoint_avg.pt -i {exp}/distill/train.en -o "
        f"{exp}/distill/train.de --beam 5",
        f"--train {exp}/distill/train --valid {work}/raw/val",
        f"mtkit train --config {ROOT}/recipes/multi30k/student.yaml --data {exp}/student-data "
        f"--run-dir {exp}/student",
        f"-o {exp}/compare/val.teacher.de \\\n\t--beam 5",
        f"-o {exp}/compare/val.student.de --beam 1\n",
        f"-o {exp}/compare/test_2016_flickr.student-int8.de --beam 1 \\\n\t--quantize int8",
    ]
    at = [out.find(text) for text in expected]
    assert all(i >= 0 for i in at), [t for t, i in zip(expected, at, strict=True) if i < 0]
    assert out.count("mtkit evaluate") == 1 and "--compare $set.student.de" not in out
    assert f"--compare {exp}/compare/$set.student-int8.de" in out
    teachers = [tmp_path / "a.pt", tmp_path / "b.pt"]
    for path in teachers:
        path.write_bytes(b"")
    given = make(recipe, ["-n", "distill"], **common, TEACHER=" ".join(map(str, teachers))).stdout
    assert f"mtkit distill -m {teachers[0]} -m {teachers[1]} -i" in given
    assert "--run-dir" not in given  # a given teacher is not trained


def test_multi30k_student_on_the_original_corpus(tmp_path: Path) -> None:
    """`STUDENT_DATA` trains the student on the original corpus instead of the distilled one
    (what distillation buys), with nothing distilled."""
    recipe = ROOT / "recipes" / "multi30k" / "Makefile"
    work = tmp_path / "work"
    exp = f"{work}/en-de"
    out = make(
        recipe,
        ["-n", "student-train"],
        MTKIT="mtkit",
        WORK=str(work),
        STUDENT_NAME="plain",
        STUDENT_DATA=f"{exp}/data",
    ).stdout
    assert f"--data {exp}/data --run-dir {exp}/plain" in out
    assert f"mtkit average --last 5 {exp}/plain -o {exp}/plain/checkpoint_avg.pt" in out
    assert "distill" not in out
