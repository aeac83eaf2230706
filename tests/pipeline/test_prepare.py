"""`mtkit prepare` as a library: manifest, same bytes from every input, filters, clean failure."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from mtkit.config import PrepareConfig, SpmConfig
from mtkit.data import encoding
from mtkit.data.binarized import FORMAT_VERSION, ParallelData, load_tokenizers, read_manifest
from mtkit.data.corpus import Source
from mtkit.data.encoding import EncoderPool
from mtkit.data.tokenizer import Tokenizer, train_spm
from mtkit.errors import MtkitError
from mtkit.pipeline import prepare as prepare_module
from mtkit.pipeline.prepare import prepare
from mtkit.pipeline.spm import train_models

MULTI30K = Path("/work/shared/data/multi30k")


def run(tmp_path: Path, spm: Path, **kw: object) -> dict:
    cfg = PrepareConfig(src_spm=str(spm), out_dir=str(tmp_path / "bin"), **kw)  # type: ignore[arg-type]
    return prepare(cfg)


def binaries(directory: Path) -> dict[str, bytes]:
    paths = sorted(directory.glob("*.*.bin")) + sorted(directory.glob("*.*.idx"))
    return {p.name: p.read_bytes() for p in paths}


def test_writes_a_dataset(tmp_path: Path, write_corpus, corpus_pairs, corpus_spm: Path) -> None:
    train = write_corpus("text", corpus_pairs[:200], "train")
    valid = write_corpus("text", corpus_pairs[200:220], "valid")
    test = write_corpus("tsv", corpus_pairs[220:], "test")
    manifest = run(tmp_path, corpus_spm, train=train, valid=valid, test=test, workers=0)
    out = tmp_path / "bin"
    assert read_manifest(out) == json.loads(json.dumps(manifest))
    assert manifest["format_version"] == FORMAT_VERSION and manifest["dtype"] == "uint16"
    assert (manifest["src_lang"], manifest["tgt_lang"], manifest["joint"]) == ("en", "de", True)
    sha = Tokenizer.from_file(corpus_spm).sha256
    assert manifest["spm"]["src"]["sha256"] == manifest["spm"]["tgt"]["sha256"] == sha
    assert (out / "spm.src.model").read_bytes() == corpus_spm.read_bytes()
    assert manifest["sources"]["train"]["src"]["path"] == f"{train}.en"
    assert manifest["sources"]["test"]["type"] == "tsv"
    assert manifest["filters"]["splits"] == ["train"]
    counts = {s: (c["read"], c["kept"]) for s, c in manifest["splits"].items()}
    assert counts == {"train": (200, 200), "valid": (20, 20), "test": (20, 20)}
    src_tok, tgt_tok = load_tokenizers(out)
    for split, pairs in (("train", corpus_pairs[:200]), ("test", corpus_pairs[220:])):
        data = ParallelData(out, split)
        pairs_ids = [data.pair(i) for i in range(len(data))]
        decoded = [(src_tok.decode([s])[0], tgt_tok.decode([t])[0]) for s, t in pairs_ids]
        assert decoded == pairs
        assert manifest["splits"][split]["tokens"]["src"] == int(data.src_lengths.sum())
    assert ParallelData(out, "valid").text("tgt") == [t for _, t in corpus_pairs[200:220]]
    assert not (out / "train.src.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_identical_bytes_across_input_formats(
    tmp_path: Path, write_corpus, corpus_pairs, corpus_spm: Path
) -> None:
    results = {}
    for kind in ("text", "tsv", "parquet", "jsonl", "disk"):
        train = write_corpus(kind, corpus_pairs[:200], f"train-{kind}")
        valid = write_corpus(kind, corpus_pairs[200:], f"valid-{kind}")
        manifest = run(tmp_path / kind, corpus_spm, train=train, valid=valid, chunk_size=64)
        assert manifest["splits"]["train"]["kept"] == 200
        results[kind] = binaries(tmp_path / kind / "bin")
        results[kind]["valid.src.txt"] = (tmp_path / kind / "bin" / "valid.src.txt").read_bytes()
    assert len(results["text"]) == 9
    for kind, files in results.items():
        assert files == results["text"], kind


def test_workers_write_the_same_bytes(
    tmp_path: Path, write_corpus, corpus_pairs, corpus_spm
) -> None:
    train = write_corpus("text", corpus_pairs)
    run(tmp_path / "serial", corpus_spm, train=train, workers=0)
    run(tmp_path / "pool", corpus_spm, train=train, workers=2, chunk_size=16)
    assert binaries(tmp_path / "pool" / "bin") == binaries(tmp_path / "serial" / "bin")


def encoder_args(spm: Path) -> tuple:
    state = Tokenizer(spm.read_bytes()).state()
    return (state, state, 0, 0.0, "uint16")


def test_encoder_pool_uses_workers_in_order(corpus_pairs, corpus_spm: Path) -> None:
    chunks = [corpus_pairs[i : i + 10] for i in range(0, 240, 10)]
    jobs = [([s for s, _ in chunk], [t for _, t in chunk], True, -1) for chunk in chunks]
    with EncoderPool(encoder_args(corpus_spm), workers=2) as pool:
        results = list(pool.map(iter(jobs)))
        assert pool.pool is not None and pool.jobs_in_workers == len(jobs)
        assert [job for job, _ in results] == jobs
        for job, encoded in results:
            expected = pool.local(job)
            assert all(np.array_equal(a, b) for a, b in zip(encoded[:5], expected[:5], strict=True))


def test_encoder_pool_bounds_the_chunks_in_flight(corpus_pairs, corpus_spm: Path) -> None:
    pulled = 0

    def jobs():
        nonlocal pulled
        for s, t in corpus_pairs:
            pulled += 1
            yield [s], [t], False, -1

    with EncoderPool(encoder_args(corpus_spm), workers=2) as pool:
        first = next(pool.map(jobs()))
        assert first[0] == ([corpus_pairs[0][0]], [corpus_pairs[0][1]], False, -1)
        assert pulled <= 2 * 2 + 1


def dying_worker(job: object) -> object:
    """An encoding worker that dies as an out-of-memory kill would end it."""
    os._exit(1)


def test_a_dead_worker_is_a_one_line_error(corpus_pairs, corpus_spm: Path, monkeypatch) -> None:
    """A worker that dies breaks the pool: one MtkitError, not a traceback (the forked workers
    see the patched function)."""
    monkeypatch.setattr(encoding, "_encode_in_worker", dying_worker)
    jobs = [([s], [t], False, -1) for s, t in corpus_pairs[:6]]
    with pytest.raises(MtkitError, match="an encoding worker stopped"):
        with EncoderPool(encoder_args(corpus_spm), workers=2) as pool:
            list(pool.map(iter(jobs)))


class CountingSource(Source):
    """``pairs`` in chunks, counting the chunks handed out."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.pairs, self.pulled = pairs, 0

    def chunks(self, size: int) -> Iterator[tuple[list[str], list[str]]]:
        for start in range(0, len(self.pairs), size):
            self.pulled += 1
            part = self.pairs[start : start + size]
            yield [s for s, _ in part], [t for _, t in part]

    def describe(self) -> dict:
        return {}


@pytest.mark.parametrize("workers, window", [(0, 1), (2, 4)])  # the pool: 2 * workers in flight
def test_a_split_streams_through_a_bounded_window(
    tmp_path: Path, corpus_pairs, corpus_spm: Path, monkeypatch, workers: int, window: int
) -> None:
    """Each chunk is written before the reader is more than the pool's window ahead of it."""
    source, ahead = CountingSource(corpus_pairs), []
    real = prepare_module.SplitWriter.add_arrays

    def add_arrays(self, *arrays: np.ndarray) -> None:
        ahead.append(source.pulled - len(ahead) - 1)  # chunks read but not yet written
        real(self, *arrays)

    monkeypatch.setattr(prepare_module.SplitWriter, "add_arrays", add_arrays)
    cfg = PrepareConfig(chunk_size=5, workers=workers)
    with EncoderPool(encoder_args(corpus_spm), workers) as pool:
        counts = prepare_module._write_split("train", [(None, source)], cfg, pool, tmp_path, {})
    assert counts["read"] == len(corpus_pairs) and len(ahead) == source.pulled == 48
    assert max(ahead) == window  # (workers 0: the pool reads 2 chunks to decide)


def test_one_chunk_is_encoded_in_process(corpus_pairs, corpus_spm: Path) -> None:
    with EncoderPool(encoder_args(corpus_spm), workers=2) as pool:
        assert len(list(pool.map(iter([(["a"], ["b"], True, -1)])))) == 1
        assert pool.pool is None


def test_filters(tmp_path: Path, corpus_pairs, corpus_spm: Path) -> None:
    base = corpus_pairs[:10]
    long = " ".join(s for s, _ in corpus_pairs[:20])
    wordy = " ".join(t for _, t in corpus_pairs[:3])
    train = [*base, ("", "leer"), ("  ", "  "), base[0], base[1], (long, long), ("Two dogs", wordy)]
    train.append((f"  {base[2][0]}\t", f"{base[2][1]}  "))  # a duplicate once stripped
    for lang, i in (("en", 0), ("de", 1)):
        (tmp_path / f"train.{lang}").write_text("\n".join(p[i] for p in train) + "\n")
        (tmp_path / f"valid.{lang}").write_text("\n".join(p[i] for p in train[10:]) + "\n")
    prefix = str(tmp_path / "train")
    valid = str(tmp_path / "valid")
    options = {"dedup": True, "max_tokens": 60, "max_ratio": 4.0}
    manifest = run(tmp_path, corpus_spm, train=prefix, valid=valid, **options)
    train_counts = manifest["splits"]["train"]
    assert train_counts["read"] == len(train)
    assert train_counts["dropped"] == {"empty": 2, "dedup": 3, "max_tokens": 1, "max_ratio": 1}
    assert train_counts["kept"] == 10
    valid_counts = manifest["splits"]["valid"]  # valid keeps every line, stripped
    assert (valid_counts["read"], valid_counts["kept"], valid_counts["dropped"]) == (7, 7, {})
    assert ParallelData(tmp_path / "bin", "valid").text("src")[:2] == ["", ""]
    no_filters = run(tmp_path / "off", corpus_spm, train=prefix, max_tokens=0, max_ratio=0)
    assert no_filters["splits"]["train"]["kept"] == len(train) - 2  # only the empty pairs


def test_separate_vocabularies(tmp_path: Path, write_corpus, corpus_pairs) -> None:
    train = write_corpus("text", corpus_pairs)
    cfg = SpmConfig(
        train=train,
        src_lang="en",
        tgt_lang="de",
        joint=False,
        vocab_size=60,
        model_prefix=str(tmp_path / "spm" / "sep"),
    )
    train_models(cfg)
    manifest = run(tmp_path, Path(cfg.model_prefix), train=train)  # --spm PREFIX finds both
    assert not manifest["joint"]
    assert manifest["spm"]["src"]["path"].endswith("sep.en.model")
    src_tok, tgt_tok = load_tokenizers(tmp_path / "bin")
    data = ParallelData(tmp_path / "bin", "train")
    assert tgt_tok.decode([data.side("tgt", 0)]) == [corpus_pairs[0][1]]
    assert src_tok.sha256 != tgt_tok.sha256


def test_spm_prefix_finds_a_joint_model(tmp_path: Path, write_corpus, corpus_pairs, corpus_spm):
    train = write_corpus("text", corpus_pairs[:20])
    manifest = run(tmp_path, corpus_spm.with_suffix(""), train=train)
    assert manifest["joint"] and manifest["spm"]["src"]["path"] == str(corpus_spm)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_mismatch_leaves_nothing_behind(tmp_path: Path, corpus_spm: Path) -> None:
    (tmp_path / "c.en").write_text("a b\n" * 5000)
    (tmp_path / "c.de").write_text("c d\n" * 4999)
    cfg = PrepareConfig(
        train=str(tmp_path / "c"),
        src_spm=str(corpus_spm),
        chunk_size=500,
        out_dir=str(tmp_path / "new" / "deeper" / "bin"),
    )
    with pytest.raises(MtkitError, match=r"c\.en has 5000 lines, .*c\.de has 4999$"):
        prepare(cfg)
    assert leftovers(tmp_path) == ["c.de", "c.en"]  # no bin, no temp dir, no parents


def test_a_late_error_removes_everything(tmp_path: Path, write_corpus, corpus_pairs, corpus_spm):
    train = write_corpus("text", corpus_pairs)
    (tmp_path / "test.en").write_bytes(b"ok\n\xfe\n")
    (tmp_path / "test.de").write_text("ok\nok\n")
    before = leftovers(tmp_path)
    with pytest.raises(MtkitError, match=r"test\.en:2: invalid UTF-8"):
        run(tmp_path, corpus_spm, train=train, test=str(tmp_path / "test"))
    assert leftovers(tmp_path) == before


def test_existing_output(tmp_path: Path, write_corpus, corpus_pairs, corpus_spm: Path) -> None:
    train = write_corpus("text", corpus_pairs[:20])
    (tmp_path / "bin").mkdir()
    run(tmp_path, corpus_spm, train=train)  # an empty directory is fine
    (tmp_path / "bin" / "stale.txt").write_text("old")
    with pytest.raises(MtkitError, match="bin: already exists .use --force"):
        run(tmp_path, corpus_spm, train=train)
    assert (tmp_path / "bin" / "stale.txt").exists()
    manifest = run(tmp_path, corpus_spm, train=write_corpus("tsv", corpus_pairs[:30]), force=True)
    assert manifest["splits"]["train"]["read"] == 30
    assert not (tmp_path / "bin" / "stale.txt").exists()
    assert [p for p in leftovers(tmp_path) if p.startswith(".")] == []


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "nothing to prepare"),
        ({"train": "c", "src_spm": ""}, "no sentencepiece model"),
        ({"train": "c", "src_spm": "missing.model"}, "missing.model: no such sentencepiece model"),
        ({"train": "c", "tgt_lang": "en"}, "two different languages"),
        ({"train": "c", "workers": -1}, "--workers"),
        ({"train": "c", "chunk_size": 0}, "--chunk-size"),
        ({"train": "c", "max_ratio": 0.5}, "--max-ratio must be 0 .off. or >= 1"),
        ({"train": "missing"}, "missing: no such corpus"),
        ({"train": "c", "valid": "c.tsv"}, "c.tsv: no such file"),
        ({"train": "c", "format": "xml"}, "unknown corpus format"),
        ({"train": "c", "out_dir": "c.en"}, "c.en: exists and is not a directory"),
    ],
)
def test_errors(tmp_path: Path, monkeypatch, corpus_spm: Path, options: dict, message: str):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.en").write_text("a\n")
    (tmp_path / "c.de").write_text("b\n")
    cfg = PrepareConfig(**{"src_spm": str(corpus_spm), "out_dir": "bin", **options})
    with pytest.raises(MtkitError, match=message):
        prepare(cfg)
    assert leftovers(tmp_path) == ["c.de", "c.en"]


@pytest.mark.slow
@pytest.mark.skipif(not MULTI30K.is_dir(), reason="Multi30k not available")
def test_multi30k(tmp_path: Path) -> None:
    spm = SpmConfig(
        train=str(MULTI30K / "train"),
        src_lang="en",
        tgt_lang="de",
        model_prefix=str(tmp_path / "m30k"),
    )
    train_models(spm)
    splits = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
    sources = {split: str(MULTI30K / name) for split, name in splits.items()}
    manifest = run(tmp_path, Path(spm.model_prefix), **sources)
    splits = manifest["splits"]
    assert [splits[s]["read"] for s in ("train", "valid", "test")] == [29000, 1014, 1000]
    assert [splits[s]["kept"] for s in ("valid", "test")] == [1014, 1000]
    assert manifest["sources"]["train"]["src"]["sha256"].startswith("460a15fbd157e34a")
    reference = (MULTI30K / "test_2016_flickr.de").read_text("utf-8").splitlines()
    assert ParallelData(tmp_path / "bin", "test").text("tgt") == reference
    assert manifest["spm"]["src"]["vocab_size"] == 8000


# ---------------------------------------------------------------------------------------------
# Several corpora, each source tagged with its target language (issue 16)


def multi_spm(tmp_path: Path, specs: dict[str, str]) -> Path:
    pairs = [f"{name}={prefix}" for name, prefix in specs.items()]
    cfg = SpmConfig(model_prefix=str(tmp_path / "multi"), vocab_size=80, pairs=pairs)
    return Path(train_models(cfg)[0]["model"])


def pair_specs(specs: dict[str, str]) -> list[str]:
    return [f"{name}={prefix}" for name, prefix in specs.items()]


def test_pairs_write_one_tagged_dataset(tmp_path: Path, multi_corpus) -> None:
    train, valid = multi_corpus(60, seed=0), multi_corpus(8, seed=10, name="valid")
    spm = multi_spm(tmp_path, train)
    manifest = run(tmp_path, spm, pairs=pair_specs(train), valid_pairs=pair_specs(valid))
    assert (manifest["src_lang"], manifest["tgt_lang"]) == ("en", "de,fr,cs")
    assert manifest["tags"] == {"cs": ">>cs<<", "de": ">>de<<", "fr": ">>fr<<"}
    assert list(manifest["sources"]["train"]) == ["en-de", "en-fr", "en-cs"]
    valid_counts = manifest["splits"]["valid"]
    assert [c["kept"] for c in valid_counts["directions"].values()] == [8, 8, 8]
    assert valid_counts["kept"] == 24
    tok, _ = load_tokenizers(tmp_path / "bin")
    data = ParallelData(tmp_path / "bin", "valid")
    texts = data.text("src")
    for k, lang in enumerate(("de", "fr", "cs")):
        tag_id = tok.piece_to_id(f">>{lang}<<")
        assert tag_id in (4, 5, 6)
        rows = range(8 * k, 8 * (k + 1))
        assert all(data.pair(i)[0][0] == tag_id for i in rows)
        assert all(texts[i].startswith(f">>{lang}<< ") for i in rows)
        assert all(list(data.pair(i)[0]) == tok.encode_one(texts[i]) for i in rows)
    train_counts = manifest["splits"]["train"]["directions"]
    assert (
        sum(c["tokens"]["src"] for c in train_counts.values())
        == (manifest["splits"]["train"]["tokens"]["src"])
    )


def test_tags_do_not_count_toward_the_filters(tmp_path: Path, multi_corpus) -> None:
    specs = multi_corpus(30)
    spm = multi_spm(tmp_path, specs)
    tok = Tokenizer.from_file(spm)
    pairs = [
        (s, t)
        for s, t in zip(
            *(Path(f"{specs['en-cs']}.{x}").read_text().split("\n")[:-1] for x in ("en", "cs")),
            strict=True,
        )
    ]
    longest = max(len(tok.encode_one(s)) for s, _ in pairs)
    # en-cs copies: ratio 1 untagged, above 1 if the tag counted
    manifest = run(
        tmp_path, spm, pairs=[f"en-cs={specs['en-cs']}"], max_tokens=longest, max_ratio=1.0
    )
    counts = manifest["splits"]["train"]
    assert counts["kept"] == 30 and counts["directions"]["en-cs"]["kept"] == 30
    assert counts["tokens"]["src"] == counts["tokens"]["tgt"] + 30


@pytest.mark.parametrize(
    "options, message",
    [
        ({"pairs": ["en-de=c", "en-de=c"]}, "^--pair en-de is given twice$"),
        ({"valid_pairs": ["en-de=c", "en-de=c"]}, "^--valid-pair en-de is given twice$"),
        ({"pairs": ["en-de=c", "en-fr=uneven"]}, "uneven.en has 3 lines, .*uneven.fr has 2$"),
        ({"pairs": ["en-de=c"], "train": "c"}, "not both"),
        ({"pairs": ["en-cs=c"]}, r"no >>cs<< symbol \(its tags: >>de<<, >>fr<<\)"),
    ],
)
def test_pair_errors(tmp_path: Path, monkeypatch, options: dict, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    for name, text in {
        "c.en": "a b\n",
        "c.de": "x y\n",
        "c.cs": "x\n",
        "uneven.en": "a\n" * 3,
        "uneven.fr": "b\n" * 2,
    }.items():
        (tmp_path / name).write_text(text)
    spm = tmp_path / "m.model"
    spm.write_bytes(
        train_spm(["a b x y"] * 9, vocab_size=20, user_defined_symbols=[">>de<<", ">>fr<<"])
    )
    before = leftovers(tmp_path)
    with pytest.raises(MtkitError, match=message):
        prepare(PrepareConfig(**{"src_spm": str(spm), "out_dir": "bin", **options}))
    assert leftovers(tmp_path) == before
