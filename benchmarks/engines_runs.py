"""Each engine bench_engines.py times, decoding the same batches: the peers (HF transformers,
CTranslate2) and mtkit's own engines, run one per process in ``--peer`` mode.

Stdlib imports only at module level: the peers run inside ``.bench/venv-engines``, which holds
no mtkit; every engine imports what it needs when it runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mtkit.config import TranslateConfig

PAD, EOS = 0, 3


def _generated_length(row: list[int]) -> int:
    """Tokens a sequence holds up to its first EOS, EOS included: HF's beam search pads finished
    hypotheses with EOS (not PAD), which must not count as generated tokens."""
    return row.index(EOS) + 1 if EOS in row else sum(1 for t in row if t != PAD)


def _bound(lengths: list[int], opts: dict) -> int:
    """The largest per-sentence length bound of a batch of sources of ``lengths`` pieces."""
    longest = max(lengths)
    bound = int(opts["max_len_a"] * longest + opts["max_len_b"])
    return min(max(bound, opts["min_len"]), opts["max_positions"] - 1)


def peer_hf(model_dir: str, batches: list[list[str]], opts: dict) -> tuple[list, int, float]:
    import warnings

    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
    from transformers.utils import logging

    logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")
    torch.set_num_threads(opts["threads"])
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)

    def run(batch: list[str]) -> tuple[list[str], int]:
        enc = tok(
            batch,
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=opts["max_positions"],
        )  # as mtkit: pieces + EOS fit the positions
        bound = _bound((enc["attention_mask"].sum(1) - 1).tolist(), opts)  # pieces, no EOS
        with torch.inference_mode():
            out = model.generate(
                **enc,
                num_beams=opts["beam"],
                length_penalty=opts["lenpen"],
                early_stopping=True,
                max_length=bound + 2,
                min_new_tokens=opts["min_len"],
                do_sample=False,
            )
        tokens = sum(_generated_length(row) for row in out[:, 1:].tolist())
        return tok.batch_decode(out, skip_special_tokens=True), tokens

    return _timed(run, batches, opts["repeat"])


def peer_ct2(model_dir: str, batches: list[list[str]], opts: dict) -> tuple[list, int, float]:
    import ctranslate2
    import sentencepiece as spm

    src = spm.SentencePieceProcessor(model_file=f"{model_dir}/source.spm")
    tgt = spm.SentencePieceProcessor(model_file=f"{model_dir}/target.spm")
    inter = opts.get("inter", 1)  # batches decoded at once, intra_threads each
    translator = ctranslate2.Translator(
        model_dir,
        device="cpu",
        compute_type="default",
        inter_threads=inter,
        intra_threads=opts["threads"] // inter,
    )

    def submit(batch: list[str]):
        pieces = [p[: opts["max_positions"] - 1] for p in src.encode(batch, out_type=str)]
        bound = _bound([len(p) for p in pieces], opts)
        return translator.translate_batch(
            pieces,
            beam_size=opts["beam"],
            length_penalty=opts["lenpen"],
            max_decoding_length=bound + 1,
            min_decoding_length=opts["min_len"],
            return_end_token=True,
            max_input_length=0,
            suppress_sequences=[["<pad>"], ["<s>"]],
            asynchronous=inter > 1,
        )

    def texts_tokens(results) -> tuple[list[str], int]:
        hyps = [r.hypotheses[0] for r in results]
        texts = [tgt.decode([p for p in h if p != "</s>"]) for h in hyps]
        return texts, sum(len(h) for h in hyps)

    def run_all(todo: list[list[str]]) -> tuple[list[str], int]:
        """Every batch submitted at once, so the ``inter`` workers each take one."""
        outputs, tokens = [], 0
        for pending in [submit(batch) for batch in todo]:
            texts, n = texts_tokens([r.result() for r in pending])
            outputs.extend(texts)
            tokens += n
        return outputs, tokens

    if inter > 1:
        return _timed_all(run_all, batches, opts["repeat"])
    return _timed(lambda batch: texts_tokens(submit(batch)), batches, opts["repeat"])


def _timed(run, batches: list[list[str]], repeat: int) -> tuple[list[str], int, list[float]]:
    """Outputs, generated tokens, and the seconds of each of ``repeat`` passes of ``run`` over
    all batches, after one warm-up batch. (The machine may be shared: report the best pass.)"""

    def run_all(todo: list[list[str]]) -> tuple[list[str], int]:
        outputs, tokens = [], 0
        for batch in todo:
            texts, n = run(batch)
            outputs.extend(texts)
            tokens += n
        return outputs, tokens

    return _timed_all(run_all, batches, repeat)


def _timed_all(run_all, batches: list[list[str]], repeat: int):
    """``run_all`` (all batches in one call) timed ``repeat`` times after a warm-up batch."""
    run_all([batches[0][:4]])
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        outputs, tokens = run_all(batches)
        seconds.append(time.perf_counter() - start)
    return outputs, tokens, seconds


def engine_config(opts: dict, **runtime) -> TranslateConfig:
    """The benchmark's search options; max_tokens so large that every engine decodes the same
    batches (no further splitting). ``inter`` batches at once: that many workers, each with
    an equal share of the threads."""
    from mtkit.config import SearchConfig, TranslateConfig

    search = SearchConfig(
        beam=opts["beam"],
        lenpen=opts["lenpen"],
        max_len_a=opts["max_len_a"],
        max_len_b=opts["max_len_b"],
        min_len=opts["min_len"],
    )
    inter = opts.get("inter", 1)
    return TranslateConfig(
        search,
        device="cpu",
        threads=opts["threads"] // inter,
        workers=inter,
        max_tokens=10**9,
        **runtime,
    )


def run_engine(engine, batches: list[list[str]], opts: dict):
    """Time ``engine`` (mtkit's protocol) on ``batches``; tokens generated, EOS included."""

    def texts_tokens(results) -> tuple[list[str], int]:
        texts = [hyps[0].text if hyps else "" for hyps in results]
        return texts, sum(hyps[0].tokens + 1 for hyps in results if hyps)

    if engine.config.workers > 1:  # every batch submitted at once

        def run_all(todo: list[list[str]]) -> tuple[list[str], int]:
            found = [texts_tokens(results) for results in engine.translate_groups(todo)]
            return [t for texts, _ in found for t in texts], sum(n for _, n in found)

        return _timed_all(run_all, batches, opts["repeat"])
    return _timed(lambda batch: texts_tokens(engine.translate(batch)), batches, opts["repeat"])


def run_mtkit(
    ckpt: Path,
    batches: list[list[str]],
    opts: dict,
    quantize: str,
    matmul: str,
    dtype="fp32",
    compile: bool = False,
):
    from mtkit.engines import load_engine

    cfg = engine_config(opts, quantize=quantize, cpu_matmul=matmul, dtype=dtype, compile=compile)
    return run_engine(load_engine([str(ckpt)], cfg), batches, opts)


def run_mtkit_ct2(ckpt: Path, model_dir: Path, batches: list[list[str]], opts: dict):
    """`mtkit translate --engine ctranslate2` (its library function) on the same batches:
    mtkit's tokenization, length limits and batching around CTranslate2, in this process."""
    from mtkit.engines import load_engine

    cfg = engine_config(opts, engine="ctranslate2")
    return run_engine(load_engine([str(model_dir)], cfg), batches, opts)
