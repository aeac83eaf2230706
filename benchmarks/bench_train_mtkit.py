"""mtkit training throughput (target tokens/s) and MFU, measured in one process.

Runs real mtkit updates (``mtkit.training.step.Stepper`` over the batches `mtkit train` would
draw: same bucketing, label-smoothed loss, Adam, clipping, autocast on CUDA and for CPU bf16)
for ``warmup`` updates, then times ``updates`` more. Model FLOPs are counted exactly per
sentence pair (matmuls only, attention included, causal attention counted in full; training =
3 x forward; Kaplan et al., 2020) over non-padding tokens, and divided by a matmul peak measured
in the same process: a large square ``torch.matmul`` in fp32 (and in the training dtype too).

    python benchmarks/bench_train_mtkit.py --data data-bin [--max-tokens 4096] [--device cuda]
    python benchmarks/bench_train_mtkit.py --synthetic 20000     # random ids, no dataset needed
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from flops import matmul_peak, train_matmul_flops  # noqa: E402

from mtkit.config import ModelConfig, TrainConfig  # noqa: E402
from mtkit.data.binarized import ParallelData, load_tokenizers, read_manifest  # noqa: E402
from mtkit.model.transformer import count_parameters, resolve_model_config  # noqa: E402
from mtkit.training.batching import (  # noqa: E402
    Group,
    epoch_batches,
    iterate_groups,
    resolve_workers,
    sentence_sizes,
)
from mtkit.training.step import Stepper  # noqa: E402


def pair_flops(cfg: ModelConfig, src_len: np.ndarray, tgt_len: np.ndarray) -> tuple[float, float]:
    """Training matmul FLOPs of these pairs: (exact with attention, 6 x params-per-token)."""
    d, f, v = cfg.d_model, cfg.ffn_dim, cfg.tgt_vocab_size
    exact = train_matmul_flops(src_len, tgt_len, d, f, v, cfg.encoder_layers, cfg.decoder_layers)
    s, t = src_len.astype(np.float64) + 1, tgt_len.astype(np.float64) + 1
    # 6 N D: each weight once per token of its side (2 FLOPs forward, 4 backward)
    enc_w = cfg.encoder_layers * (4 * d * d + 2 * d * f)
    dec_w = cfg.decoder_layers * (6 * d * d + 2 * d * f)
    approx = 6 * (
        enc_w * s.sum()
        + dec_w * t.sum()
        + 2 * cfg.decoder_layers * d * d * s.sum()
        + d * v * t.sum()
    )
    return exact, float(approx)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def model_config(
    data_dir: str, preset: str, overrides: dict[str, Any] | None = None
) -> ModelConfig:
    src, tgt = load_tokenizers(data_dir)
    joint = bool(read_manifest(data_dir).get("joint")) and len(src) == len(tgt)
    values = {"share_all_embeddings": joint, **(overrides or {})}
    return resolve_model_config(preset, len(src), len(tgt), values)


# the compile phases dynamo's timers report (a second compile_attempt: the trace restarted)
COMPILE_PHASES = (
    "_compile.compile_inner",
    "compile_attempt_0",
    "compile_attempt_1",
    "aot_trace_joint_graph",
    "fx_codegen_and_compile",
)


def compile_phases() -> dict[str, float]:
    """Seconds of each of :data:`COMPILE_PHASES` dynamo has timed in this process so far."""
    times = torch._dynamo.utils.compilation_time_metrics
    return {phase: sum(times[phase]) for phase in COMPILE_PHASES if phase in times}


def cache_counts() -> dict[str, int]:
    """Hits and misses of inductor's FX graph cache and AOTAutograd's cache on disk in this
    process so far (dynamo's counters): a graph compiled before in another process is a hit."""
    counters = torch._dynamo.utils.counters
    found = {**counters["inductor"], **counters["aot_autograd"]}
    names = ("fxgraph_cache_hit", "fxgraph_cache_miss", "autograd_cache_hit", "autograd_cache_miss")
    return {name: found[name] for name in names if found.get(name)}


def training_batches(train: ParallelData, cfg: TrainConfig, n: int) -> list[torch.Tensor]:
    """The first ``n`` batches of ``cfg.max_tokens`` that training draws, over as many epochs
    as they take."""
    sizes = sentence_sizes(train.src_lengths, train.tgt_lengths)
    batches, epoch = [], 1
    while len(batches) < n:
        batches += epoch_batches(sizes, cfg.max_tokens, cfg.seed, epoch)
        epoch += 1
    return batches[:n]


def load_groups(
    train: ParallelData, batches: list[torch.Tensor], cfg: TrainConfig, device: torch.device
) -> tuple[Iterator[Group], int]:
    """One-batch update groups loaded as `mtkit train` loads them (worker processes as
    ``cfg.num_workers`` resolves on ``device``: 2 on CUDA), and the number of workers."""
    workers = resolve_workers(cfg.num_workers, device)[0]
    args = {"num_workers": workers, "pin_memory": device.type == "cuda"}
    return iterate_groups(train, batches, 0, 0, 1, 1, args), workers


def bench_train_mtkit(
    data_dir: str,
    max_tokens: int = 4096,
    updates: int = 20,
    warmup: int = 5,
    device: str = "auto",
    precision: str = "auto",
    preset: str = "transformer-small",
    overrides: dict[str, Any] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    compile: str = "off",
) -> dict[str, Any]:
    """Time ``updates`` mtkit updates after ``warmup``; returns throughput and MFU figures.
    ``overrides``: ModelConfig fields on top of the preset (a model variant); ``clock``:
    ``time.process_time`` counts this process's CPU seconds instead of wall-clock ones (with
    one thread, robust to other work on the machine); ``compile``: ``--compile`` (the warmup
    updates compile, their seconds reported as ``warmup_seconds``)."""
    cfg = TrainConfig(
        data=data_dir,
        device=device,
        precision=precision,
        max_tokens=max_tokens,
        warmup_updates=4000,
        compile=compile,
    )
    mcfg = model_config(data_dir, preset, overrides)
    step = Stepper(cfg, mcfg)  # nothing is written: the run directory is not used
    train = ParallelData(data_dir, "train")
    batches = training_batches(train, cfg, warmup + updates)
    groups, workers = load_groups(train, batches, cfg, step.device)
    torch._dynamo.utils.compilation_time_metrics.clear()
    torch._dynamo.utils.counters.clear()
    began = time.perf_counter()
    for i, group in enumerate(groups):
        if i == warmup:
            _sync(step.device)
            start = clock()
            warmup_seconds = time.perf_counter() - began
        step.forward_backward(group)
        step.optimizer_step()
    _sync(step.device)
    seconds = clock() - start
    timed = torch.cat(batches[warmup:]).numpy()
    exact, approx = pair_flops(mcfg, train.src_lengths[timed], train.tgt_lengths[timed])
    tgt_tokens = int((train.tgt_lengths[timed] + 1).sum())
    padded = sum(len(b) * int(train.tgt_lengths[b.numpy()].max() + 1) for b in batches[warmup:])
    size = 8192 if step.device.type == "cuda" else 1024
    peak_fp32 = matmul_peak(step.device, torch.float32, size, repeats=10)
    train_dtype = step.amp_dtype or torch.float32
    peak_train = peak_fp32
    if train_dtype != torch.float32:
        peak_train = matmul_peak(step.device, train_dtype, size, repeats=10)
    return {
        "device": str(step.device),
        "precision": step.precision,
        "compiled": step.compiling.on,
        "warmup_seconds": warmup_seconds,
        "compile_phases": compile_phases(),
        "compile_cache": cache_counts(),
        "threads": torch.get_num_threads(),
        "loader_workers": workers,
        "params": count_parameters(step.model),
        "max_tokens": max_tokens,
        "updates": updates,
        "seconds": seconds,
        "tgt_tokens": tgt_tokens,
        "tgt_padding": 1 - tgt_tokens / padded,
        "tgt_tokens_per_s": tgt_tokens / seconds,
        "updates_per_s": updates / seconds,
        "model_flops_per_s": exact / seconds,
        "model_flops_6nd_per_s": approx / seconds,
        "matmul_peak_fp32": peak_fp32,
        "matmul_peak_train_dtype": peak_train,
        "mfu_vs_fp32_peak": exact / seconds / peak_fp32,
        "mfu_vs_train_dtype_peak": exact / seconds / peak_train,
    }


def write_synthetic(out: Path, pairs: int, vocab: int = 8000, seed: int = 0) -> Path:
    """A binarized dataset of random ids, lengths like Multi30k (mean ~14, 4..40 pieces)."""
    from mtkit.data import binarized
    from mtkit.data.tokenizer import Tokenizer, train_spm

    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    words = [f"w{i}" for i in range(4000)]
    lines = [" ".join(rng.choice(words, 12)) for _ in range(40000)]
    # BPE on these words stops a few pieces past their number: symbols of their own make up
    # the rest, so that the vocabulary (the output projection's width) is the one asked for
    fill = [f"<s{i}>" for i in range(max(0, vocab - len(words)))]
    model = train_spm(lines, vocab_size=vocab, user_defined_symbols=fill)
    vocab = len(Tokenizer(model))
    for side in binarized.SIDES:
        (out / f"spm.{side}.model").write_bytes(model)
    lengths = np.clip(rng.normal(14, 6, size=(2, pairs)).round(), 4, 40).astype(int)
    writer = binarized.SplitWriter(out, "train", np.dtype(np.uint16))
    ids = [[rng.integers(4, vocab, n).tolist() for n in side] for side in lengths]
    writer.add_many(ids[0], ids[1])
    writer.close()
    manifest = {
        "format_version": binarized.FORMAT_VERSION,
        "dtype": "uint16",
        "joint": True,
        "splits": {"train": {"pairs": pairs}},
        "src_lang": "xx",
        "tgt_lang": "yy",
    }
    (out / binarized.MANIFEST).write_text(json.dumps(manifest))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="binarized dataset directory (mtkit prepare)")
    parser.add_argument("--synthetic", type=int, default=0, help="random dataset of N pairs")
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--preset", default="transformer-small")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    parser.add_argument("--compile", default="off", choices=["off", "on", "auto"])
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or str(write_synthetic(Path(tmp) / "data", args.synthetic or 20000))
        result = bench_train_mtkit(
            data,
            args.max_tokens,
            args.updates,
            args.warmup,
            args.device,
            args.precision,
            args.preset,
            compile=args.compile,
        )
    result["data"] = args.data or f"synthetic ({args.synthetic or 20000} pairs)"
    for key, value in result.items():
        print(f"{key:24s} {value:.4g}" if isinstance(value, float) else f"{key:24s} {value}")
    print(
        f"\nmtkit {args.preset}: {result['tgt_tokens_per_s']:,.0f} target tokens/s, "
        f"MFU {100 * result['mfu_vs_train_dtype_peak']:.1f}% of a "
        f"{result['matmul_peak_train_dtype'] / 1e9:,.0f} GFLOP/s {result['precision']} matmul "
        f"on {result['device']}"
    )


if __name__ == "__main__":
    main()
