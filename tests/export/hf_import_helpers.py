"""Helpers the Hugging Face import tests share: a saved model loaded by transformers, and the
same lines searched by mtkit."""

from __future__ import annotations

import warnings
from pathlib import Path

from mtkit.checkpoint import load_for_inference
from mtkit.config import SearchConfig
from mtkit.decoding import generate
from mtkit.decoding.batching import pad_batch

BOUND = 30  # target tokens before EOS; no hypothesis reaches it (checked)


def load_hf(model_dir: Path):
    import transformers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.MarianMTModel.from_pretrained(model_dir).eval()
        return model, transformers.MarianTokenizer.from_pretrained(model_dir)


def ours(path: Path, lines: list[str], beam: int, lenpen: float) -> list[list[int]]:
    loaded = load_for_inference(path)
    ids = loaded.model.special_ids
    src = pad_batch([row + [ids.eos] for row in loaded.src_tokenizer.encode(lines)], pad=ids.pad)
    cfg = SearchConfig(beam=beam, lenpen=lenpen, max_len_a=0, max_len_b=BOUND, min_len=1)
    return [hyps[0].tokens for hyps in generate([loaded.model], src, cfg)]
