"""bench_train.py's data: the Multi30k train/valid files, stripped copies both tools read, and
one joint sentencepiece BPE model for both (with a JoeyNMT vocabulary file of its pieces)."""

from __future__ import annotations

from pathlib import Path

import multi30k
from train_configs import SRC, TGT, VOCAB_SIZE

SPLITS = {"train": "train", "valid": "val"}  # our name -> Multi30k file stem


def find_corpus(data_dir: str | None) -> dict[str, dict[str, Path]]:
    """Paths of the train/valid files per language: --data-dir, the shipped .gz copy, shared/."""
    dirs = (Path(data_dir),) if data_dir else (multi30k.SHIPPED, multi30k.SHARED)
    paths = {
        split: {lang: multi30k.find(stem, lang, dirs) for lang in (SRC, TGT)}
        for split, stem in SPLITS.items()
    }
    if any(path is None for langs in paths.values() for path in langs.values()):
        raise SystemExit(f"no Multi30k train/val {SRC}-{TGT} files in {', '.join(map(str, dirs))}")
    return paths


def read_lines(path: Path) -> list[str]:
    return [line.strip() for line in multi30k.read_lines(path)]


def write_corpus(paths: dict[str, dict[str, Path]], out: Path) -> dict[str, dict[str, list[str]]]:
    """Stripped copies of the corpus (both tools read these) as out/{train,valid}.{en,de}."""
    out.mkdir(parents=True, exist_ok=True)
    corpus = {}
    for split, langs in paths.items():
        corpus[split] = {lang: read_lines(path) for lang, path in langs.items()}
        for lang, lines in corpus[split].items():
            (out / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    n = len(corpus["train"][SRC])
    assert all(len(c[SRC]) == len(c[TGT]) for c in corpus.values()), "unaligned corpus"
    assert all(all(c[SRC]) and all(c[TGT]) for c in corpus.values()), "empty lines in corpus"
    print(f"data: {n} training pairs from {paths['train'][SRC].parent}", flush=True)
    return corpus


def train_joint_spm(corpus: dict[str, dict[str, list[str]]], out: Path) -> Path:
    """One joint BPE model for both tools; also a JoeyNMT vocabulary file of its pieces."""
    import sentencepiece as spm

    from mtkit.data.tokenizer import train_spm

    model = out / "spm.model"
    lines = corpus["train"][SRC] + corpus["train"][TGT]
    model.write_bytes(train_spm(lines, VOCAB_SIZE, seed=1, num_threads=2))
    sp = spm.SentencePieceProcessor(model_file=str(model))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    (out / "vocab.txt").write_text("\n".join(pieces) + "\n", encoding="utf-8")
    print(f"spm: {len(pieces)} pieces -> {model}", flush=True)
    return model


def corpus_lengths(model: Path, corpus: dict[str, dict[str, list[str]]]) -> tuple[list, list]:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model))
    src = [len(ids) for ids in sp.encode(corpus["train"][SRC])]
    tgt = [len(ids) for ids in sp.encode(corpus["train"][TGT])]
    return src, tgt
