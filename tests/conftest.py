"""Fixtures shared across the test tree."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from shared_folders import built_once

from mtkit.data.tokenizer import train_spm

# Under pytest-xdist (`make test` runs two workers on CI's two cores) each worker computes on
# one thread, so the two do not fight over the cores; tests that need more set it themselves.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

# The slowest modules, slowest first (seconds on CI's 2 cores). `--dist loadfile` hands each
# worker the next module in collection order as it comes free: collected last, a long module
# would keep one worker busy while the other sits idle; collected first, the short ones fill in.
SLOWEST = (  # measured with --durations=0, 2026-11-29
    "model/test_compiled.py",  # ~110 s: AOTInductor builds three libraries
    "test_recipes.py",  # ~95 s: every recipe target, each a process
    "model/test_traced.py",  # ~75 s: exported graphs, each traced
    "training/test_compiled_train.py",  # ~65 s: dynamo traces
    "decoding/test_join.py",  # ~60 s
    "training/test_kill_anywhere.py",  # ~45 s
    "export/test_export_variants.py",  # ~45 s
    "serve/test_server.py",
    "cli/test_cli_translate.py",
    "training/test_augment.py",
    "training/test_resume.py",
    "test_bad_input.py",
    "export/test_import_hf.py",
    "pipeline/test_translate.py",
    "cli/test_cli_constraints.py",
    "pipeline/test_warm.py",
    "decoding/test_search.py",
    "engines/test_skeleton.py",
    "training/test_variants.py",
    "serve/test_stepping.py",
    "serve/test_detect.py",
    "training/test_ddp.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules of :data:`SLOWEST` first, in its order; the rest as collected."""
    tests = Path(__file__).parent
    rank = {name: i for i, name in enumerate(SLOWEST)}
    items.sort(key=lambda item: rank.get(item.path.relative_to(tests).as_posix(), len(rank)))


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """One intra-op torch thread: tiny models run fastest on one, and CI's cores are shared.
    Modules ask for it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---------------------------------------------------------------------------------------------
# A small generated en-de corpus in every format `mtkit prepare` reads (data/, pipeline/, cli/)

_SUBJECTS = [
    ("A man", "Ein Mann"),
    ("A woman", "Eine Frau"),
    ("Two dogs", "Zwei Hunde"),
    ("The child", "Das Kind"),
    ("A little girl", "Ein kleines Mädchen"),
    ("Three boys", "Drei Jungen"),
]
_VERBS = [
    ("is running", "läuft"),
    ("is sitting", "sitzt"),
    ("plays", "spielt"),
    ("is waiting", "wartet"),
]
_PLACES = [
    ("in the park.", "im Park."),
    ("on the street.", "auf der Straße."),
    ("near the lake.", "am See."),
    ("in front of a white fence.", "vor einem weißen Zaun."),
]

CorpusWriter = Callable[..., str]


def make_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` aligned (English, German) sentences built from small phrase tables."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        parts = [rng.choice(table) for table in (_SUBJECTS, _VERBS, _PLACES)]
        pairs.append((" ".join(p[0] for p in parts), " ".join(p[1] for p in parts)))
    return pairs


@pytest.fixture(scope="session")
def corpus_pairs() -> list[tuple[str, str]]:
    return make_pairs(240)


@pytest.fixture(scope="session")
def corpus_spm(tmp_path_factory: pytest.TempPathFactory, corpus_pairs: list) -> Path:
    """A joint en-de sentencepiece model (mtkit's special ids) trained on ``corpus_pairs``."""
    path = tmp_path_factory.mktemp("spm") / "joint.model"
    path.write_bytes(train_spm([s for pair in corpus_pairs for s in pair], vocab_size=120))
    return path


def write_corpus_files(
    directory: Path,
    kind: str,
    pairs: list[tuple[str, str]],
    name: str = "corpus",
    langs: tuple[str, str] = ("en", "de"),
) -> str:
    """Write ``pairs`` as ``kind`` (text, tsv, parquet, jsonl, disk); return the source spec."""
    src_lang, tgt_lang = langs
    rows = [{"translation": {src_lang: s, tgt_lang: t}} for s, t in pairs]
    base = directory / name
    if kind == "text":
        for i, lang in enumerate(langs):
            Path(f"{base}.{lang}").write_text("".join(f"{p[i]}\n" for p in pairs), "utf-8")
        return str(base)
    if kind == "tsv":
        Path(f"{base}.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs), "utf-8")
        return f"{base}.tsv"
    if kind == "jsonl":
        lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        Path(f"{base}.jsonl").write_text(lines, "utf-8")
        return f"{base}.jsonl"
    if kind == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), f"{base}.parquet")
        return f"{base}.parquet"
    if kind == "disk":
        import datasets

        datasets.Dataset.from_list(rows).save_to_disk(str(base))
        return str(base)
    raise ValueError(kind)


@pytest.fixture
def write_corpus(tmp_path: Path) -> CorpusWriter:
    """``write_corpus(kind, pairs, name="corpus", langs=("en", "de"))`` -> source spec."""

    def write(kind: str, pairs: list[tuple[str, str]], name: str = "corpus", **kw: object) -> str:
        return write_corpus_files(tmp_path, kind, pairs, name, **kw)  # type: ignore[arg-type]

    return write


# ---------------------------------------------------------------------------------------------
# A tiny binarized dataset (training/), written directly, without `mtkit prepare`

_SRC_WORDS = "the a man woman dog cat runs walks on in red blue big small house street".split()
_TGT_WORDS = "der ein mann frau hund katze rennt geht auf im rot blau gross klein haus strasse"
_WORD_DICT = dict(zip(_SRC_WORDS, _TGT_WORDS.split(), strict=True))


def word_pairs(n: int, seed: int, min_words: int = 2, max_words: int = 7) -> list[tuple[str, str]]:
    """``n`` word-by-word "translations" between two made-up 16-word languages."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        words = [rng.choice(_SRC_WORDS) for _ in range(rng.randint(min_words, max_words))]
        pairs.append((" ".join(words), " ".join(_WORD_DICT[w] for w in words)))
    return pairs


def write_tiny_dataset(
    out: Path,
    train: list[tuple[str, str]],
    valid: list[tuple[str, str]],
    joint: bool = True,
    vocab_size: int = 64,
    spm_extra: list[str] = (),  # type: ignore[assignment]
) -> Path:
    """A binarized dataset directory as `mtkit prepare` lays it out (mtkit.data.binarized);
    ``spm_extra``: more lines the (joint) sentencepiece model learns from, not in the data."""
    import numpy as np

    from mtkit.data import binarized
    from mtkit.data.tokenizer import Tokenizer

    out.mkdir(parents=True, exist_ok=True)
    if joint:
        lines = [s for p in train for s in p] + list(spm_extra)
        src_model = tgt_model = train_spm(lines, vocab_size=vocab_size)
    else:
        src_model = train_spm([s for s, _ in train], vocab_size=vocab_size)
        tgt_model = train_spm([t for _, t in train], vocab_size=vocab_size)
    (out / "spm.src.model").write_bytes(src_model)
    (out / "spm.tgt.model").write_bytes(tgt_model)
    src_tok, tgt_tok = Tokenizer(src_model), Tokenizer(tgt_model)
    dtype = np.dtype(np.uint16)
    splits = {}
    for split, pairs in (("train", train), ("valid", valid)):
        writer = binarized.SplitWriter(out, split, dtype)
        writer.add_many(
            src_tok.encode([s for s, _ in pairs]), tgt_tok.encode([t for _, t in pairs])
        )
        writer.close()
        splits[split] = {"pairs": writer.count}
        if split != "train":
            for i, side in enumerate(binarized.SIDES):
                text = "".join(f"{pair[i]}\n" for pair in pairs)
                (out / f"{split}.{side}.txt").write_text(text, encoding="utf-8")
    manifest = {
        "format_version": binarized.FORMAT_VERSION,
        "dtype": dtype.name,
        "splits": splits,
        "src_lang": "en",
        "tgt_lang": "de",
        "joint": joint,
    }
    (out / binarized.MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 training and 16 validation pairs of a word-substitution task, joint vocabulary."""
    out = tmp_path_factory.mktemp("tiny-data") / "data"
    return write_tiny_dataset(out, word_pairs(200, seed=1), word_pairs(16, seed=2))


@pytest.fixture
def make_tiny_dataset(tmp_path: Path) -> Callable[..., Path]:
    """``make_tiny_dataset(name, train_pairs, valid_pairs, joint=True, vocab_size=64)``."""

    def make(name: str, train: list, valid: list, **kwargs: object) -> Path:
        return write_tiny_dataset(tmp_path / name, train, valid, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture
def tiny_word_pairs() -> Callable[..., list[tuple[str, str]]]:
    """``tiny_word_pairs(n, seed, min_words=2, max_words=7)``: see :func:`word_pairs`."""
    return word_pairs


# ---------------------------------------------------------------------------------------------
# A multilingual corpus (issue 16): one English source, three targets that differ visibly

MULTI_LANGS = ("de", "fr", "cs")


def multi_pairs(n: int, seed: int, lang: str) -> list[tuple[str, str]]:
    """``word_pairs`` turned into target ``lang``: de word by word, fr the same words in
    reverse order, cs the English copied."""
    pairs = word_pairs(n, seed, max_words=5)
    if lang == "de":
        return pairs
    if lang == "fr":
        return [(s, " ".join(reversed(t.split()))) for s, t in pairs]
    return [(s, s) for s, _ in pairs]


def write_multi_corpus(directory: Path, n: int, seed: int, name: str) -> dict[str, str]:
    """Text files ``name.en-xx.{en,xx}`` per direction; returns {"en-xx": prefix}."""
    specs = {}
    for lang in MULTI_LANGS:  # the same English sources: only the tag tells the target
        pairs = multi_pairs(n, seed, lang)
        prefix = write_corpus_files(directory, "text", pairs, f"{name}.en-{lang}", ("en", lang))
        specs[f"en-{lang}"] = prefix
    return specs


@pytest.fixture
def multi_corpus(tmp_path: Path) -> Callable[..., dict[str, str]]:
    """``multi_corpus(n, seed, name)`` -> {"en-de": prefix, "en-fr": ..., "en-cs": ...}."""

    def write(n: int, seed: int = 0, name: str = "train") -> dict[str, str]:
        return write_multi_corpus(tmp_path, n, seed, name)

    return write


def prepare_multi_dataset(directory: Path, n: int = 60, n_valid: int = 8) -> Path:
    """`mtkit spm train --pair` and `mtkit prepare --pair --valid-pair` on ``write_multi_corpus``:
    en -> de, fr, cs in one dataset ``directory/bin`` (joint vocabulary with the three tags)."""
    from mtkit.config import PrepareConfig, SpmConfig
    from mtkit.pipeline.prepare import prepare
    from mtkit.pipeline.spm import train_models

    def specs(kind: str, m: int, seed: int) -> list[str]:
        written = write_multi_corpus(directory, m, seed, kind)
        return [f"{name}={prefix}" for name, prefix in written.items()]

    train, valid = specs("train", n, 0), specs("valid", n_valid, 0)  # valid: train's first
    prefix = str(directory / "spm")
    train_models(SpmConfig(model_prefix=prefix, vocab_size=120, pairs=train))
    out = directory / "bin"
    prepare(
        PrepareConfig(
            src_spm=f"{prefix}.model",
            out_dir=str(out),
            pairs=train,
            valid_pairs=valid,
            max_ratio=0,
            workers=0,
        )
    )
    return out


@pytest.fixture(scope="session")
def multi_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prepared three-direction dataset (see :func:`prepare_multi_dataset`), built once."""
    return built_once(tmp_path_factory, "multi", prepare_multi_dataset) / "bin"


MULTI_TRAIN = [
    "--device",
    "cpu",
    "--max-tokens",
    "512",
    "--lr",
    "5e-3",
    "--warmup-updates",
    "10",
    "--max-updates",
    "500",
    "--validate-every",
    "250",
    "--save-every",
    "0",
    "--label-smoothing",
    "0",
    "-q",
    "--set",
    "model.d_model=32",
    "--set",
    "model.ffn_dim=64",
    "--set",
    "model.heads=2",
    "--set",
    "model.encoder_layers=2",
    "--set",
    "model.decoder_layers=2",
    "--set",
    "model.dropout=0",
    "--set",
    "model.attention_dropout=0",
    "--set",
    "pair_temperature=2",
]


@pytest.fixture(scope="session")
def multi_run(tmp_path_factory: pytest.TempPathFactory, multi_dataset: Path) -> Path:
    """The run directory of a tiny model trained on ``multi_dataset`` (about 8 s on one CPU
    thread, once per test run) until it follows the tags: BLEU 100 per direction on the first
    training pairs."""
    from click.testing import CliRunner

    from mtkit.cli import cli

    def train(run: Path) -> None:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            args = ["train", "--data", str(multi_dataset), "--run-dir", str(run), *MULTI_TRAIN]
            result = CliRunner().invoke(cli, args)
        finally:
            torch.set_num_threads(threads)
        assert result.exit_code == 0, result.output

    return built_once(tmp_path_factory, "multi/run", train)  # beside its corpus
