"""`mtkit spm train` as a library: files or corpora in, PREFIX.model + PREFIX.vocab out."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtkit.config import SpmConfig
from mtkit.data.tokenizer import SPECIAL_IDS, UNK_ID, Tokenizer
from mtkit.errors import MtkitError
from mtkit.pipeline.spm import summary, train_models, vocab_text


def spm_cfg(tmp_path: Path, **kw: object) -> SpmConfig:
    defaults: dict = {"model_prefix": str(tmp_path / "out" / "spm"), "vocab_size": 60}
    return SpmConfig(**{**defaults, **kw})


def check_model(path: Path, max_size: int = 60) -> Tokenizer:
    tok = Tokenizer.from_file(path)  # checks the special ids
    assert {tok.sp.IdToPiece(i) for i in SPECIAL_IDS.values()} == {"<pad>", "<unk>", "<s>", "</s>"}
    assert 4 < len(tok) <= max_size
    vocab = path.with_suffix(".vocab").read_text("utf-8").splitlines()
    assert len(vocab) == len(tok) and vocab[0] == "<pad>\t0"
    return tok


def test_from_text_files(tmp_path: Path, write_corpus, corpus_pairs) -> None:
    prefix = write_corpus("text", corpus_pairs)
    cfg = spm_cfg(tmp_path, inputs=[f"{prefix}.en", f"{prefix}.de"])
    (result,) = train_models(cfg)
    assert result["model"] == f"{cfg.model_prefix}.model"
    assert result["sentences"] == 2 * len(corpus_pairs)
    tok = check_model(Path(result["model"]))
    assert result["sha256"] == tok.sha256
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["spm.model", "spm.vocab"]


def test_joint_from_corpus_equals_training_on_both_files(
    tmp_path: Path, write_corpus, corpus_pairs
) -> None:
    prefix = write_corpus("text", corpus_pairs)
    joint = spm_cfg(tmp_path, train=prefix, src_lang="en", tgt_lang="de")
    (result,) = train_models(joint)
    assert result["sentences"] == 2 * len(corpus_pairs)
    tsv = write_corpus("tsv", corpus_pairs)
    (from_tsv,) = train_models(
        spm_cfg(tmp_path, model_prefix=str(tmp_path / "t"), train=tsv, src_lang="en", tgt_lang="de")
    )
    assert from_tsv["sha256"] == result["sha256"]  # same sentences, same order, same model


@pytest.mark.parametrize("kind", ["text", "jsonl"])
def test_separate_models(tmp_path: Path, write_corpus, corpus_pairs, kind: str) -> None:
    spec = write_corpus(kind, corpus_pairs)
    cfg = spm_cfg(tmp_path, train=spec, src_lang="en", tgt_lang="de", joint=False)
    results = train_models(cfg)
    assert [r["model"] for r in results] == [
        f"{cfg.model_prefix}.en.model",
        f"{cfg.model_prefix}.de.model",
    ]
    en, de = (check_model(Path(r["model"])) for r in results)
    assert "ä" in {de.sp.IdToPiece(i) for i in range(len(de))}  # each learns its own side
    assert "ä" not in {en.sp.IdToPiece(i) for i in range(len(en))}


def test_input_sentence_size_samples(tmp_path: Path, write_corpus, corpus_pairs) -> None:
    prefix = write_corpus("text", corpus_pairs)
    cfg = spm_cfg(tmp_path, inputs=[f"{prefix}.en"], input_sentence_size=150, vocab_size=40)
    (result,) = train_models(cfg)
    assert result["sentences"] == len(corpus_pairs)  # all streamed; sentencepiece samples
    check_model(Path(result["model"]), max_size=40)


def test_blank_lines_crlf_and_bom_are_cleaned(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_bytes(
        b"\xef\xbb\xbf" + b"hello world\r\n\r\n   \nhello there\n" * 20
    )
    (result,) = train_models(spm_cfg(tmp_path, inputs=[str(tmp_path / "in.txt")], vocab_size=30))
    assert result["sentences"] == 40
    tok = check_model(Path(result["model"]), max_size=30)
    assert "\ufeff" not in "".join(tok.sp.IdToPiece(i) for i in range(len(tok)))


def test_overwrites_atomically(tmp_path: Path, write_corpus, corpus_pairs) -> None:
    prefix = write_corpus("text", corpus_pairs)
    cfg = spm_cfg(tmp_path, inputs=[f"{prefix}.en"])
    first = train_models(cfg)[0]["sha256"]
    cfg.vocab_size = 50
    second = train_models(cfg)[0]["sha256"]
    assert first != second
    assert Tokenizer.from_file(f"{cfg.model_prefix}.model").sha256 == second
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["spm.model", "spm.vocab"]


def test_vocab_text_lists_every_piece(corpus_spm: Path) -> None:
    lines = vocab_text(corpus_spm.read_bytes()).splitlines()
    assert lines[:4] == ["<pad>\t0", "<unk>\t0", "<s>\t0", "</s>\t0"]
    assert len(lines) == len(Tokenizer.from_file(corpus_spm))


BYTES_TOO_MANY = r"^--byte-fallback needs --vocab-size above 260 \(4 special pieces and 256 byte "
CHARS_TOO_MANY = "^--vocab-size 262 is too small: .* need 267; "  # 4 + 256 + 7 characters


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "nothing to train on"),
        ({"inputs": ["a.txt"], "train": "corpus"}, "not both"),
        ({"inputs": ["missing.txt"]}, "missing.txt: no such file"),
        ({"inputs": ["empty.txt"]}, "no text to train on"),
        ({"inputs": ["bad.txt"]}, r"bad.txt:2: invalid UTF-8"),
        ({"train": "corpus"}, "--src-lang and --tgt-lang"),
        ({"train": "missing", "src_lang": "en", "tgt_lang": "de"}, "missing: no such corpus"),
        ({"train": "uneven", "src_lang": "en", "tgt_lang": "de"}, "line counts differ"),
        ({"inputs": ["a.txt"], "vocab_size": 3}, "--vocab-size must be at least 5"),
        ({"inputs": ["a.txt"], "character_coverage": 0.0}, "--character-coverage"),
        ({"inputs": ["a.txt"], "input_sentence_size": -1}, "--input-sentence-size"),
        ({"inputs": ["a.txt"], "input_sentence_size": 100}, "0 .every sentence. or > 100"),
        ({"inputs": ["a.txt"], "byte_fallback": True, "vocab_size": 260}, BYTES_TOO_MANY),
        ({"inputs": ["a.txt"], "byte_fallback": True, "vocab_size": 262}, CHARS_TOO_MANY),
        ({"inputs": ["a.txt"], "vocab_size": 6}, "^--vocab-size 6 is too small: .* need 11;"),
    ],
)
def test_errors(tmp_path: Path, monkeypatch, options: dict, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.txt").write_text("some text\n" * 10)
    (tmp_path / "empty.txt").write_text("\n  \n")
    (tmp_path / "bad.txt").write_bytes(b"fine\n\xc3\x28 broken\n" * 10)
    (tmp_path / "uneven.en").write_text("a b c\n" * 30)
    (tmp_path / "uneven.de").write_text("x y z\n" * 29)
    with pytest.raises(MtkitError, match=message):
        train_models(spm_cfg(tmp_path, **options))
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------
# Several corpora, one model with the target languages' tags (issue 16)


def test_pairs_train_one_model_with_the_tags(tmp_path: Path, multi_corpus) -> None:
    specs = multi_corpus(40)
    pairs = [f"{name}={prefix}" for name, prefix in specs.items()]
    (result,) = train_models(spm_cfg(tmp_path, pairs=pairs, vocab_size=80))
    assert result["sentences"] == 2 * 40 * 3
    assert result["tags"] == [">>de<<", ">>fr<<", ">>cs<<"]
    tok = check_model(Path(result["model"]), max_size=80)
    assert [tok.piece_to_id(t) for t in result["tags"]] == [4, 5, 6]
    assert summary([result]).endswith(", tags >>de<< >>fr<< >>cs<<")


ONE_TAG = r"above 261 \(4 special pieces, 1 tag and 256 byte pieces\), got 261$"
TWO_TAGS = r"above 262 \(4 special pieces, 2 tags and 256 byte pieces\), got 262$"


@pytest.mark.parametrize(
    "options, message",
    [
        ({"pairs": ["en-de=c", "en-de=c"]}, "^--pair en-de is given twice$"),
        ({"pairs": ["en-de=uneven"]}, "line counts differ: uneven.en has 30 lines"),
        ({"pairs": ["en-fr=c"]}, "c.fr: no such file"),
        ({"pairs": ["en-de=c"], "joint": False}, "--separate is not available"),
        ({"pairs": ["en-de=c"], "train": "c"}, "not both"),
        ({"pairs": ["ende=c"]}, "expected SRC-TGT=SOURCE"),
        ({"pairs": ["en-de=c"], "byte_fallback": True, "vocab_size": 261}, ONE_TAG),
        ({"pairs": ["en-de=c", "de-en=c"], "byte_fallback": True, "vocab_size": 262}, TWO_TAGS),
    ],
)
def test_pair_errors(tmp_path: Path, monkeypatch, options: dict, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.en").write_text("a b c\n" * 30)
    (tmp_path / "c.de").write_text("x y z\n" * 30)
    (tmp_path / "uneven.en").write_text("a b c\n" * 30)
    (tmp_path / "uneven.de").write_text("x y z\n" * 29)
    with pytest.raises(MtkitError, match=message):
        train_models(spm_cfg(tmp_path, **options))
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------
# Byte fallback (issue 50)


@pytest.mark.parametrize("byte_fallback", [False, True])
def test_byte_fallback(tmp_path: Path, write_corpus, corpus_pairs, byte_fallback: bool) -> None:
    prefix = write_corpus("text", corpus_pairs)
    files = [f"{prefix}.en", f"{prefix}.de"]
    cfg = spm_cfg(tmp_path, inputs=files, vocab_size=300, byte_fallback=byte_fallback)
    (result,) = train_models(cfg)
    tok = check_model(Path(result["model"]), max_size=300)
    vocab = Path(result["vocab"]).read_text("utf-8").splitlines()
    assert result["byte_fallback"] is tok.byte_fallback is byte_fallback
    assert (vocab[4:6] == ["<0x00>\t0", "<0x01>\t0"]) is byte_fallback  # the .vocab lists them
    assert ("(256 of them bytes: byte fallback) from" in summary([result])) is byte_fallback
    assert (UNK_ID not in tok.encode_one("Ein Hund 🐶 läuft ≈ 犬")) is byte_fallback
    if byte_fallback:
        assert len(tok) == 300 and tok.decode(tok.encode(["🐶 ≈ 犬"])) == ["🐶 ≈ 犬"]


def test_byte_fallback_with_tags(tmp_path: Path, multi_corpus) -> None:
    pairs = [f"{name}={prefix}" for name, prefix in multi_corpus(40).items()]
    (result,) = train_models(spm_cfg(tmp_path, pairs=pairs, vocab_size=320, byte_fallback=True))
    tok = check_model(Path(result["model"]), max_size=320)
    assert tok.pieces_by_id()[4:8] == [">>de<<", ">>fr<<", ">>cs<<", "<0x00>"]
    assert tok.tags == [">>de<<", ">>fr<<", ">>cs<<"] and tok.byte_fallback
