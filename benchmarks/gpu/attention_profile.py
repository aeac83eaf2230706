"""attention_profile.py CKPT SRC DEVICE: decode SRC in fp32, bf16 (and fp16 on CUDA) in one
process: the first (cold) and second (warm) pass of each timed, and a profile of the
half-precision passes (what made the first bf16 pass on an H200 7x slower than fp32: cuDNN
attention's per-shape plans, see mtkit.devices.steady_attention)."""

import sys
import time

import torch

from mtkit.config.search import TranslateConfig
from mtkit.engines import load_engine
from mtkit.pipeline.translate import translate_with


def timed(engine, lines: list[str], sync) -> float:
    start = time.perf_counter()
    translate_with(engine, lines)
    sync()
    return time.perf_counter() - start


ckpt, src, dev = sys.argv[1:4]
lines = open(src, encoding="utf-8").read().splitlines()
cuda = dev.startswith("cuda")
sync = torch.cuda.synchronize if cuda else (lambda: None)
for dtype in ["fp32", "bf16", "fp16"] if cuda else ["fp32", "bf16"]:
    engine = load_engine([ckpt], TranslateConfig(device=dev, dtype=dtype))
    cold, warm = timed(engine, lines, sync), timed(engine, lines, sync)
    print(f"{dtype}: first pass {cold:.2f} s, second {warm:.2f} s", flush=True)
    if dtype != "fp32":
        acts = [torch.profiler.ProfilerActivity.CPU]
        acts += [torch.profiler.ProfilerActivity.CUDA] if cuda else []
        with torch.profiler.profile(activities=acts) as prof:
            timed(engine, lines[:100], sync)
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18)
        print(table, flush=True)
