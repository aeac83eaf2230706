"""The data stages: `mtkit spm` (sentencepiece training) and `mtkit prepare` (binarizing)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SpmConfig:
    """Sentencepiece BPE training."""

    inputs: list[str] = field(default_factory=list)  # text files, one sentence per line
    model_prefix: str = "spm"  # writes PREFIX.model and PREFIX.vocab
    vocab_size: int = 8000
    character_coverage: float = 1.0
    input_sentence_size: int = 0  # sample this many sentences (0: use all)
    seed: int = 1
    num_threads: int = 2
    # characters outside the vocabulary -> their UTF-8 bytes (256 pieces <0x00>..<0xFF>, part of
    # vocab_size), not UNK
    byte_fallback: bool = False
    # or, instead of inputs, a parallel corpus as `mtkit prepare` reads it (see PrepareConfig)
    train: str = ""
    src_lang: str = ""
    tgt_lang: str = ""
    joint: bool = True  # True: PREFIX.model; False: PREFIX.SRC.model and PREFIX.TGT.model
    format: str = "auto"  # auto | text | tsv | hf
    hf_config: str = ""
    pairs: list[str] = field(default_factory=list)  # or several: SRC-TGT=SOURCE (multilingual)


@dataclass
class PrepareConfig:
    """Read a parallel corpus, clean it, encode it with spm, and binarize it."""

    src_lang: str = "en"
    tgt_lang: str = "de"
    out_dir: str = "data-bin"
    src_spm: str = ""
    tgt_spm: str = ""  # empty: same model as src_spm (joint vocabulary)
    tokenizer_from: str = ""  # or a checkpoint: its spm models and vocabulary (fine-tuning)
    # sources, per split: a file prefix (PREFIX.SRC/PREFIX.TGT), a .tsv file, a parquet/json(l)
    # file or save_to_disk directory in the HF translation schema, or hf:NAME[:SPLIT] (the hub)
    train: str = ""
    valid: str = ""
    test: str = ""
    format: str = "auto"  # auto | text | tsv | hf
    hf_config: str = ""  # HF dataset configuration, e.g. "de-en"
    max_tokens: int = 256  # drop pairs longer than this (spm pieces, either side); 0: no limit
    max_ratio: float = 3.0  # drop pairs whose length ratio exceeds this; 0: no limit
    dedup: bool = False  # drop exact duplicate pairs
    workers: int = 2  # encoding processes; 0: encode in the main process
    chunk_size: int = 2000  # pairs per encoding job
    force: bool = False  # replace an existing out_dir
    # multilingual (mtkit.data.tags): SRC-TGT=SOURCE per corpus, instead of train/valid/test
    pairs: list[str] = field(default_factory=list)
    valid_pairs: list[str] = field(default_factory=list)
    test_pairs: list[str] = field(default_factory=list)


@dataclass
class ShortlistConfig:
    """`mtkit shortlist build`: a lexical shortlist learned from a dataset's training split."""

    data: str = ""  # a dataset directory (`mtkit prepare`)
    output: str = ""  # the shortlist file to write (gzip'd JSON, mtkit.data.shortlist)
    method: str = "ibm1"  # ibm1: IBM model 1's p(t|s) | dice: Dice's co-occurrence coefficient
    top_k: int = 100  # candidates kept per source piece
    frequent: int = 200  # most frequent target pieces, allowed in every batch
    iterations: int = 5  # EM iterations of ibm1
